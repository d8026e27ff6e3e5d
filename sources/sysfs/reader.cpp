#include "sources/sysfs/reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <utility>

#include "sources/sysfs/parse.h"

namespace rdma::sysfs {

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

namespace {

Result<std::string> read_file_at(int dirfd, const char* path) {
  int fd = ::openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Result<std::string>::failure(classify_errno(errno), errno);
  // sysfs attributes are at most one page; read until EOF anyway in case of odd files.
  char buf[4096];
  std::string out;
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Result<std::string>::failure(classify_errno(err), err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    // sysfs returns a whole attribute in one read, and regular files read short only at EOF:
    // a short read ends the file without a second system call.
    if (static_cast<std::size_t>(n) < sizeof buf) break;
    if (out.size() > (1u << 20)) break;  // never slurp a huge non-sysfs file
  }
  ::close(fd);
  return Result<std::string>::success(std::move(out));
}

Result<std::string> attribute_of(Result<std::string> r) {
  if (!r) return r;
  if (is_not_available(r.value)) return Result<std::string>::failure(ReadError::kNotAvailable);
  return Result<std::string>::success(std::string(trim_value(r.value)));
}

Result<std::uint64_t> u64_of(const Result<std::string>& r) {
  if (!r) return Result<std::uint64_t>::failure(r.error, r.sys_errno);
  if (is_not_available(r.value)) return Result<std::uint64_t>::failure(ReadError::kNotAvailable);
  auto v = parse_u64(r.value);
  if (!v) return Result<std::uint64_t>::failure(ReadError::kMalformed);
  return Result<std::uint64_t>::success(*v);
}

Result<std::vector<DirEntry>> list_dir_stream(DIR* d) {
  std::vector<DirEntry> out;
  int dfd = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::fstatat(dfd, e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
    }
    out.push_back(DirEntry{std::string(name), is_dir});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return Result<std::vector<DirEntry>>::success(std::move(out));
}

}  // namespace

Result<std::string> read_file(const std::string& path) { return read_file_at(AT_FDCWD, path.c_str()); }
Result<std::string> read_attribute(const std::string& path) { return attribute_of(read_file(path)); }
Result<std::uint64_t> read_u64(const std::string& path) { return u64_of(read_file(path)); }

Result<Dir> Dir::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Result<Dir>::failure(classify_errno(errno), errno);
  Dir d;
  d.fd_ = fd;
  d.path_ = path;
  return Result<Dir>{std::move(d), ReadError::kNone, 0};
}

Dir& Dir::operator=(Dir&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

Dir::~Dir() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::string> Dir::read_file(const char* name) const { return read_file_at(fd_, name); }
Result<std::string> Dir::read_attribute(const char* name) const { return attribute_of(read_file(name)); }
Result<std::uint64_t> Dir::read_u64(const char* name) const { return u64_of(read_file(name)); }

Result<std::vector<DirEntry>> Dir::list() const {
  // fdopendir takes ownership of its descriptor: give it a duplicate.
  int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Result<std::vector<DirEntry>>::failure(classify_errno(errno), errno);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    int err = errno;
    ::close(fd);
    return Result<std::vector<DirEntry>>::failure(classify_errno(err), err);
  }
  return list_dir_stream(d);
}

Result<std::vector<DirEntry>> list_dir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (!d) return Result<std::vector<DirEntry>>::failure(classify_errno(errno), errno);
  return list_dir_stream(d);
}

Result<std::vector<std::string>> list_names(const std::string& path) {
  auto r = list_dir(path);
  if (!r) return Result<std::vector<std::string>>::failure(r.error, r.sys_errno);
  std::vector<std::string> names;
  names.reserve(r.value.size());
  for (auto& e : r.value) names.push_back(std::move(e.name));
  return Result<std::vector<std::string>>::success(std::move(names));
}

Result<std::string> read_link_basename(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return Result<std::string>::failure(classify_errno(errno), errno);
  std::string_view target(buf, static_cast<std::size_t>(n));
  auto slash = target.rfind('/');
  if (slash != std::string_view::npos) target.remove_prefix(slash + 1);
  return Result<std::string>::success(std::string(target));
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

}  // namespace rdma::sysfs
