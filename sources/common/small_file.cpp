#include "sources/common/small_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace rdma {

Result<std::string> read_small_file(const std::string& path, std::size_t max_bytes) {
  using R = Result<std::string>;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return R::failure(classify_errno(errno), errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string out;
  char buf[4096];
  while (out.size() <= max_bytes) {
    // Up to one byte past the bound: enough to know the file is larger, never more.
    const ssize_t n = ::read(fd, buf, std::min(sizeof buf, max_bytes + 1 - out.size()));
    if (n == 0) return R::success(std::move(out));
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (const int err = errno; err != EINTR) {
      return R::failure(classify_errno(err), err);
    }
  }
  return R::failure(classify_errno(EFBIG), EFBIG);
}

}  // namespace rdma
