// Reads files under a configurable sysfs root (--path.sysfs) with plain open/read/close: one
// system call each, no iostreams, so a scrape costs little more than the kernel's own work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sources/sysfs/read_result.h"

namespace rdma::sysfs {

// Reads a whole small attribute file (sysfs caps attributes at one page).
Result<std::string> read_file(const std::string& path);
// Reads and trims an attribute; "N/A (no PMA)" becomes ReadError::kNotAvailable.
Result<std::string> read_attribute(const std::string& path);
// Reads an exact unsigned 64-bit counter.
Result<std::uint64_t> read_u64(const std::string& path);

struct DirEntry {
  std::string name;
  bool is_dir = false;  // follows symlinks (class/infiniband entries are links)
};
// Entries of a directory except "." and "..", sorted by name for stable output.
Result<std::vector<DirEntry>> list_dir(const std::string& path);
// Names only, sorted.
Result<std::vector<std::string>> list_names(const std::string& path);
// Target of a symlink, last path component only ("mlx5_core" for device/driver).
Result<std::string> read_link_basename(const std::string& path);
bool exists(const std::string& path);

// An open directory: files inside are read with openat(), so the kernel resolves one name
// instead of the whole path (class/infiniband/<dev> is a symlink chain into /sys/devices).
// The per-port and per-device readers use it; that is what keeps a scrape near the raw cost.
class Dir {
 public:
  static Result<Dir> open(const std::string& path);
  Dir() = default;
  Dir(Dir&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  Dir& operator=(Dir&& o) noexcept;
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  ~Dir();

  Result<std::string> read_file(const char* name) const;
  Result<std::string> read_attribute(const char* name) const;
  Result<std::uint64_t> read_u64(const char* name) const;
  // Entries, sorted by name, as list_dir().
  Result<std::vector<DirEntry>> list() const;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace rdma::sysfs
