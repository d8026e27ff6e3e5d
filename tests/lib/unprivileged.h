// For the C++ tests that need a permission error while they run as root (root reads a mode-000
// file or directory): while an Unprivileged lives, the process's effective user and group are
// nobody/nogroup (65534); root again after. Run as another user, it changes nothing.
#pragma once

#include <unistd.h>

#include <exception>
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

}  // namespace rdma::testing
