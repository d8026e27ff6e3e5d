// Typed results of reading from the kernel (sysfs files, netlink, ethtool ioctls, MADs): a value
// or the reason it could not be read. Errors are values here because one unreadable file or
// device must never abort a scrape.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

namespace rdma {

enum class ReadError : std::uint8_t {
  kNone = 0,
  kNotFound,      // ENOENT/ENOTDIR: file or device vanished
  kInvalid,       // EINVAL: the kernel refused (failed PMA MAD, empty GID entry, ...)
  kIo,            // EIO and other I/O failures of firmware-backed attributes
  kNoDevice,      // ENODEV/ENXIO: device unregistered while open
  kAccess,        // EACCES/EPERM
  kTimeout,       // ETIMEDOUT (firmware command timed out, no netlink answer)
  kNotSupported,  // EOPNOTSUPP
  kNotAvailable,  // the legacy literal "N/A (no PMA)"
  kMalformed,     // readable, but not in the expected format
  kOther,
};

// Short stable token for metrics labels (reason="...") and logs.
std::string_view reason_label(ReadError e);
ReadError classify_errno(int err);

template <class T>
struct Result {
  T value{};
  ReadError error = ReadError::kNone;
  int sys_errno = 0;  // 0 unless the error came from a system call

  bool ok() const { return error == ReadError::kNone; }
  explicit operator bool() const { return ok(); }
  static Result success(T v) { return Result{std::move(v), ReadError::kNone, 0}; }
  static Result failure(ReadError e, int err = 0) { return Result{T{}, e, err}; }
};

}  // namespace rdma
