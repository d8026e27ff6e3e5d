#include "sources/common/result.h"

#include <cerrno>

namespace rdma {

std::string_view reason_label(ReadError e) {
  switch (e) {
    case ReadError::kNone: return "none";
    case ReadError::kNotFound: return "not_found";
    case ReadError::kInvalid: return "invalid_argument";
    case ReadError::kIo: return "io_error";
    case ReadError::kNoDevice: return "no_device";
    case ReadError::kAccess: return "permission_denied";
    case ReadError::kTimeout: return "timeout";
    case ReadError::kNotSupported: return "not_supported";
    case ReadError::kNotAvailable: return "not_available";
    case ReadError::kMalformed: return "malformed";
    case ReadError::kOther: return "other";
  }
  return "other";
}

ReadError classify_errno(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return ReadError::kNotFound;
    case EINVAL: return ReadError::kInvalid;
    case EIO: return ReadError::kIo;
    case ENODEV:
    case ENXIO: return ReadError::kNoDevice;
    case EACCES:
    case EPERM: return ReadError::kAccess;
    case ETIMEDOUT: return ReadError::kTimeout;
    case EOPNOTSUPP: return ReadError::kNotSupported;
    default: return ReadError::kOther;
  }
}

}  // namespace rdma
