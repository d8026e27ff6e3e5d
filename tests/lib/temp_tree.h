// Shared by the C++ tests that build fake sysfs trees: a temporary directory, removed at the
// end, with files written by path relative to it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rdma::testing {

class TempTree {
 public:
  // parent: where the tree goes (a test that reads it as nobody passes
  // reachable_temp_directory() from unprivileged.h).
  explicit TempTree(const std::string& prefix = "rdma_test",
                    const std::filesystem::path& parent = std::filesystem::temp_directory_path()) {
    std::string tmpl = (parent / (prefix + ".XXXXXX")).string();
    root_ = mkdtemp(tmpl.data());
  }
  ~TempTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::string& root() const { return root_; }
  // Writes content (exactly, no newline added) to root/rel, creating its directories. An
  // absolute rel (a path already under root) is used as it is.
  void write(const std::string& rel, const std::string& content) const {
    const std::filesystem::path p = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
  }

 private:
  std::string root_;
};

// Sets a directory's mtime to a fixed past second, so that any later entry change gives it a
// different one whatever the timestamp granularity (caches of sysfs directories compare it).
inline bool age_dir(const std::string& dir) {
  const timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  return ::utimensat(AT_FDCWD, dir.c_str(), old, 0) == 0;
}

}  // namespace rdma::testing
