// The raw floor for the port collector: a plain open/read/close loop over exactly the files the
// exporter reads for one scrape (device and port attributes, counters/, counters_ext/, the
// netdev lookups). Prints the median time of one pass over them, and of one pass of pread at
// offset 0 through descriptors kept open (what the exporter's reads alone cost: its bound).
//
// With "serve" in place of the pass count it times one open/read/close pass per line read on
// stdin and prints its seconds: bench_port.py runs that pass at the same point of each scrape
// cycle as the exporter's own collection, so that both meet the caches that node_exporter's
// scrape left behind. Back-to-back passes find everything hot from the pass before, which no
// scrape does.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: raw_floor SYSFS_ROOT [passes]\n");
    return 2;
  }
  const std::string root = std::string(argv[1]) + "/class/infiniband/";
  const bool serve = argc > 2 && std::string(argv[2]) == "serve";
  const int passes = argc > 2 && !serve ? std::atoi(argv[2]) : 200;
  std::vector<std::string> files;
  for (const auto& dev : entries(root)) {
    for (const char* a : {"node_type", "node_guid", "sys_image_guid", "fw_ver", "hca_type", "hw_rev", "board_id",
                          "node_desc", "parent"})
      files.push_back(root + dev + "/" + a);
    for (const auto& port : entries(root + dev + "/ports")) {
      const std::string p = root + dev + "/ports/" + port + "/";
      for (const char* a : {"link_layer", "state", "phys_state", "rate", "lid", "sm_lid"}) files.push_back(p + a);
      // The exporter reads the RoCE netdev binding of Ethernet ports only.
      if (std::FILE* f = std::fopen((p + "link_layer").c_str(), "r")) {
        char ll[32] = {};
        if (std::fgets(ll, sizeof ll, f) && std::string(ll).rfind("Ethernet", 0) == 0)
          for (const char* i : {"0", "1", "2", "3"}) files.push_back(p + "gid_attrs/ndevs/" + i);
        std::fclose(f);
      }
      for (const char* dir : {"counters", "counters_ext"})
        for (const auto& c : entries(p + dir)) files.push_back(p + dir + "/" + c);
    }
  }
  char buf[4096];
  const auto open_read_close_pass = [&] {
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& f : files) {
      int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      while (read(fd, buf, sizeof buf) > 0) {
      }
      close(fd);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (serve) {
    std::printf("files=%zu\n", files.size());
    std::fflush(stdout);
    for (char line[64]; std::fgets(line, sizeof line, stdin);) {
      std::printf("%.9f\n", open_read_close_pass());
      std::fflush(stdout);
    }
    return 0;
  }
  std::vector<double> times;
  for (int i = 0; i < passes; ++i) times.push_back(open_read_close_pass());
  std::sort(times.begin(), times.end());
  const double open_median = times[times.size() / 2];
  std::vector<int> fds;
  for (const auto& f : files)
    if (int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) fds.push_back(fd);
  times.clear();
  for (int i = 0; i < passes; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    for (int fd : fds)
      if (pread(fd, buf, sizeof buf, 0) < 0) std::perror("pread");
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  for (int fd : fds) close(fd);
  std::sort(times.begin(), times.end());
  std::printf("files=%zu median_seconds=%.9f pread_files=%zu pread_median_seconds=%.9f\n", files.size(), open_median,
              fds.size(), times[times.size() / 2]);
  return 0;
}
