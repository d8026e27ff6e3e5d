// The one reader of a small file a user names (a shared secret, a bearer token, a name map, a
// topology file, a web config): read whole up to a bound the caller chooses, so that a wrong path
// (a log, a device node) costs at most that much memory and a caller never takes a prefix of a
// larger file for its content.
#pragma once

#include <cstddef>
#include <string>

#include "sources/common/result.h"

namespace rdma {

// The whole file at `path` if it holds at most `max_bytes`; a larger one is a failure with
// sys_errno EFBIG (ReadError::kOther), read no further than max_bytes + 1 bytes. A file that cannot
// be opened or read fails with its errno (classify_errno).
Result<std::string> read_small_file(const std::string& path, std::size_t max_bytes);

}  // namespace rdma
