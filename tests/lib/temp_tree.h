// Shared by the C++ tests that build fake sysfs trees: a temporary directory, removed at the
// end, with files written by path relative to it.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace rdma::testing {

class TempTree {
 public:
  explicit TempTree(const std::string& prefix = "rdma_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
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

}  // namespace rdma::testing
