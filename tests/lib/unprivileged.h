// For the C++ tests that need a permission error while they run as root (root reads a mode-000
// file or directory): while an Unprivileged lives, the process's effective user and group are
// nobody/nogroup (65534); root again after. Run as another user, it changes nothing. What nobody
// reads must be where nobody can reach it: reachable_temp_directory().
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <stdexcept>

namespace rdma::testing {

class Unprivileged {
 public:
  Unprivileged() : root_(geteuid() == 0) {
    // The group first: changing it needs the privilege that the user change gives up.
    if (root_ && (setegid(kNobody) != 0 || seteuid(kNobody) != 0))
      throw std::runtime_error("cannot switch the effective user to nobody");
  }
  ~Unprivileged() {
    if (root_ && (seteuid(0) != 0 || setegid(0) != 0)) std::terminate();  // the rest of the run needs root back
  }
  Unprivileged(const Unprivileged&) = delete;
  Unprivileged& operator=(const Unprivileged&) = delete;

 private:
  static constexpr uid_t kNobody = 65534;
  bool root_;
};

// Where to put a tree that nobody reads: the temporary directory when others can search every
// directory above it and itself, else /tmp. A root user's TMPDIR may be under /root (mode 0700),
// where nobody reaches nothing (tests/lib/unprivileged.py does the same for binaries).
inline std::filesystem::path reachable_temp_directory() {
  auto searchable = [](std::filesystem::path p) {
    for (p = std::filesystem::absolute(p);; p = p.parent_path()) {
      struct stat st {};
      if (stat(p.c_str(), &st) != 0 || !(st.st_mode & S_IXOTH)) return false;
      if (p == p.root_path()) return true;
    }
  };
  std::error_code ec;
  const auto tmp = std::filesystem::temp_directory_path(ec);
  if (!ec && searchable(tmp)) return tmp;
  if (searchable("/tmp")) return "/tmp";
  throw std::runtime_error("no temporary directory that nobody can reach (" + tmp.string() + ", /tmp)");
}

}  // namespace rdma::testing
