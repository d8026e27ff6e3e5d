#include "sources/sysfs/reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <utility>

#include "sources/sysfs/parse.h"

namespace rdma::sysfs {

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

// Lists the directory open as fd from its start, and closes fd. getdents64 on the descriptor
// itself: opendir()/fdopendir() add a stat, two fcntl calls and a 32 KiB buffer to each listing.
// kind: whether is_dir is wanted; finding it for a symlink costs a stat through the link (the
// entries of class/infiniband are links into /sys/devices), which a caller of names only skips.
Result<std::vector<DirEntry>> list_fd(int fd, bool kind = true) {
  using R = Result<std::vector<DirEntry>>;
  std::vector<DirEntry> out;
  alignas(struct dirent64) char buf[8192];
  for (;;) {
    const ssize_t n = ::getdents64(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return R::failure(classify_errno(err), err);
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const struct dirent64*>(buf + off);
      off += e->d_reclen;
      const std::string_view name = e->d_name;
      if (name == "." || name == "..") continue;
      bool is_dir = e->d_type == DT_DIR;
      if (kind && (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN)) {
        struct stat st;
        is_dir = ::fstatat(fd, e->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
      }
      out.push_back(DirEntry{std::string(name), is_dir});
    }
  }
  ::close(fd);
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return R::success(std::move(out));
}

Result<std::vector<DirEntry>> list_path(const std::string& path, bool kind) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Result<std::vector<DirEntry>>::failure(classify_errno(errno), errno);
  return list_fd(fd, kind);
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

namespace {
Result<std::vector<DirEntry>> list_at(int dir_fd, bool kind = true) {
  // A descriptor of its own, read from the start: dir_fd's offset is left alone.
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Result<std::vector<DirEntry>>::failure(classify_errno(errno), errno);
  return list_fd(fd, kind);
}
}  // namespace

Result<std::vector<DirEntry>> Dir::list() const { return list_at(fd_); }

namespace {
Result<std::vector<std::string>> names_of(Result<std::vector<DirEntry>> r) {
  if (!r) return Result<std::vector<std::string>>::failure(r.error, r.sys_errno);
  std::vector<std::string> names;
  names.reserve(r.value.size());
  for (auto& e : r.value) names.push_back(std::move(e.name));
  return Result<std::vector<std::string>>::success(std::move(names));
}
}  // namespace

Result<std::vector<std::string>> Dir::names() const { return names_of(list_at(fd_, false)); }

Result<std::vector<DirEntry>> list_dir(const std::string& path) { return list_path(path, true); }

Result<std::vector<std::string>> list_names(const std::string& path) {
  return names_of(list_path(path, false));
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

bool DirIdentity::operator==(const DirIdentity& o) const {
  return dev == o.dev && ino == o.ino && nlink == o.nlink && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec &&
         ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
}

namespace {
DirIdentity identity_of(const struct stat& st) {
  return DirIdentity{st.st_dev, st.st_ino, st.st_nlink, st.st_mtim, st.st_ctim};
}
}  // namespace

Result<DirIdentity> DirIdentity::of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Result<DirIdentity>::failure(classify_errno(errno), errno);
  return Result<DirIdentity>::success(identity_of(st));
}

Result<DirIdentity> DirIdentity::of(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Result<DirIdentity>::failure(classify_errno(errno), errno);
  return Result<DirIdentity>::success(identity_of(st));
}

Result<DirIdentity> DirIdentity::of(int dir_fd, const char* relative) {
  struct stat st;
  if (::fstatat(dir_fd, relative, &st, 0) != 0) return Result<DirIdentity>::failure(classify_errno(errno), errno);
  return Result<DirIdentity>::success(identity_of(st));
}

bool DirIdentity::settled(int racy_seconds) const {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return now.tv_sec - std::max(mtime.tv_sec, ctime.tv_sec) >= racy_seconds;
}

void KeptDir::close_all() {
  for (auto& [name, fd] : files_) ::close(fd);
  files_.clear();
  names_.clear();
  name_fds_.clear();
  listed_ = false;
  if (dir_fd_ >= 0) ::close(dir_fd_);
  dir_fd_ = -1;
}

ReadError KeptDir::refresh(const KeptDir* parent, const DirIdentity* known) {
  const std::string_view above = parent ? std::string_view(parent->path_) : std::string_view();
  const bool below = parent && parent->dir_fd_ >= 0 && path_.size() > above.size() + 1 &&
                     path_.starts_with(above) && path_[above.size()] == '/';
  if (below && dir_fd_ < 0 && dir_error_ == ReadError::kNotFound && absent_under_ == parent->generation())
    return dir_error_;
  absent_under_ = 0;
  // Open under a parent that has kept its identity since (it is reopened when it changes, or at
  // every refresh while racy): no entry of it was added, removed or renamed, so the name still
  // names this directory, and its descriptor shows its own changes (an fstat, no path walk).
  const bool same_name = below && dir_fd_ >= 0 && opened_under_ != 0 && opened_under_ == parent->generation();
  auto now_id = known       ? Result<DirIdentity>::success(*known)
                : same_name ? DirIdentity::of(dir_fd_)
                : below     ? DirIdentity::of(parent->dir_fd_, path_.c_str() + above.size() + 1)
                            : DirIdentity::of(path_);
  if (!now_id) {
    dir_errno_ = now_id.sys_errno;
    dir_error_ = now_id.error;
    close_all();
    if (below && dir_error_ == ReadError::kNotFound) absent_under_ = parent->generation();
    return dir_error_;
  }
  if (dir_fd_ >= 0 && !racy_ && now_id.value == identity_) return ReadError::kNone;
  close_all();
  dir_fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  // The identity of what was opened, not of what was stat'ed before: a change in between is seen
  // at the next refresh.
  auto opened = dir_fd_ >= 0 ? DirIdentity::of(dir_fd_) : Result<DirIdentity>::failure(classify_errno(errno), errno);
  if (!opened) {
    dir_errno_ = opened.sys_errno;
    dir_error_ = opened.error;
    close_all();
    return dir_error_;
  }
  dir_error_ = ReadError::kNone;
  dir_errno_ = 0;
  static std::atomic<std::uint64_t> openings{0};
  generation_ = ++openings;
  opened_under_ = below ? parent->generation() : 0;
  identity_ = opened.value;
  racy_ = !identity_.settled(racy_seconds_);
  return ReadError::kNone;
}

Result<const std::vector<std::string>*> KeptDir::names() {
  using R = Result<const std::vector<std::string>*>;
  if (dir_fd_ < 0) return R::failure(dir_error_, dir_errno_);
  if (!listed_) {
    auto entries = list_at(dir_fd_, false);
    if (!entries) return R::failure(entries.error, entries.sys_errno);
    names_.clear();
    for (auto& e : entries.value) names_.push_back(std::move(e.name));
    name_fds_.assign(names_.size(), -1);
    listed_ = true;
  }
  return R::success(&names_);
}

std::size_t KeptDir::descriptors() const { return files_.size() + (dir_fd_ >= 0 ? 1 : 0); }

Result<int> KeptDir::file_fd(const char* name, bool reopen) {
  if (dir_fd_ < 0) return Result<int>::failure(dir_error_, dir_errno_);
  auto it = files_.find(std::string_view(name));
  if (it != files_.end()) {
    if (!reopen) return Result<int>::success(it->second);
    ::close(it->second);
    files_.erase(it);
  }
  int fd = ::openat(dir_fd_, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Result<int>::failure(classify_errno(errno), errno);
  ++opens_;
  files_.emplace(name, fd);
  return Result<int>::success(fd);
}

namespace {
// One pread at offset 0 into buf; 0 or its errno. Through syscall(): glibc's pread() is a
// cancellation point, and in a process with threads it brackets the system call with two atomic
// updates of the thread's cancellation state, which the exporter never uses (no pthread_cancel);
// at 448 reads a scrape under bench/port they were a tenth of each read's cost.
int pread_page(int fd, char* buf, std::size_t cap, std::size_t& len) {
  for (;;) {
    const long n = ::syscall(SYS_pread64, fd, buf, cap, 0L);
    if (n >= 0) {
      len = static_cast<std::size_t>(n);
      return 0;
    }
    if (errno != EINTR) return errno;
  }
}
}  // namespace

Result<std::size_t> KeptDir::read_page(const char* name, char* buf, std::size_t cap, int* slot) {
  using R = Result<std::size_t>;
  int known = slot ? *slot : -1;
  if (known < 0)
    if (auto it = files_.find(std::string_view(name)); it != files_.end()) known = it->second;
  const bool kept = known >= 0;
  auto fd = kept ? Result<int>::success(known) : file_fd(name, false);
  if (!fd) return R::failure(fd.error, fd.sys_errno);
  if (slot) *slot = fd.value;
  std::size_t len = 0;
  int err = pread_page(fd.value, buf, cap, len);
  if (err == 0) {
    if (kept) ++preads_;
    return R::success(len);
  }
  // The file went away under a kept descriptor (kernfs answers ENODEV once the attribute is
  // removed): open it again once, which fails or succeeds as an open without a kept descriptor would.
  if (!kept || (err != ENODEV && err != ENOENT && err != ESTALE)) return R::failure(classify_errno(err), err);
  if (slot) *slot = -1;
  fd = file_fd(name, true);
  if (!fd) return R::failure(fd.error, fd.sys_errno);
  if (slot) *slot = fd.value;
  err = pread_page(fd.value, buf, cap, len);
  if (err != 0) return R::failure(classify_errno(err), err);
  return R::success(len);
}

// sysfs attributes are at most one page (kernfs seq_file show() buffers are PAGE_SIZE): a read of
// one page at offset 0 is the whole attribute; of a longer regular file, its first page.
Result<std::string> KeptDir::read_file(const char* name) {
  char buf[4096];
  auto n = read_page(name, buf, sizeof buf);
  if (!n) return Result<std::string>::failure(n.error, n.sys_errno);
  return Result<std::string>::success(std::string(buf, n.value));
}

Result<std::uint64_t> KeptDir::read_u64(const char* name) { return u64_of_page(name, nullptr); }

Result<std::uint64_t> KeptDir::read_u64_at(std::size_t i) {
  if (!listed_ || i >= names_.size()) return Result<std::uint64_t>::failure(ReadError::kNotFound);
  return u64_of_page(names_[i].c_str(), &name_fds_[i]);
}

Result<std::uint64_t> KeptDir::u64_of_page(const char* name, int* slot) {
  using R = Result<std::uint64_t>;
  char buf[4096];
  auto n = read_page(name, buf, sizeof buf, slot);
  if (!n) return R::failure(n.error, n.sys_errno);
  const std::string_view text(buf, n.value);
  if (is_not_available(text)) return R::failure(ReadError::kNotAvailable);
  auto v = parse_u64(text);
  if (!v) return R::failure(ReadError::kMalformed);
  return R::success(*v);
}

// As attribute_of(read_file(name)), trimmed in the page: one string made instead of two.
Result<std::string> KeptDir::read_attribute(const char* name) {
  using R = Result<std::string>;
  char buf[4096];
  auto n = read_page(name, buf, sizeof buf);
  if (!n) return R::failure(n.error, n.sys_errno);
  const std::string_view text(buf, n.value);
  if (is_not_available(text)) return R::failure(ReadError::kNotAvailable);
  return R::success(std::string(trim_value(text)));
}

KeptDirs::Entry& KeptDirs::entry(const std::string& path, const KeptDir* parent, const DirIdentity* known) {
  Entry* e;
  bool first;
  {
    std::lock_guard lock(mu_);
    e = &dirs_[path];
    if (!e->dir) e->dir = std::make_unique<KeptDir>(path);
    first = !std::exchange(e->used, true);
  }
  if (first) e->dir->refresh(parent, known);  // its error is the directory's: reads answer it
  return *e;
}

KeptDir& KeptDirs::at(const std::string& path, const KeptDir* parent, const DirIdentity* known) {
  return *entry(path, parent, known).dir;
}

KeptDir& KeptDirs::at(Ref& ref, const std::string& path, const KeptDir* parent, const DirIdentity* known) {
  const std::uint64_t cycle = cycle_.load(std::memory_order_relaxed);
  // Asked for in the last cycle, the sweep that ended it kept the entry; in this one, no sweep since.
  // Each path is used by one thread at a time, and sweep() runs when none is: its used flag is this
  // thread's to set.
  if (ref.entry_ && ref.cycle_ + 1 >= cycle && ref.entry_->dir->path() == path) {
    if (!std::exchange(ref.entry_->used, true)) ref.entry_->dir->refresh(parent, known);
  } else {
    ref.entry_ = &entry(path, parent, known);
  }
  ref.cycle_ = cycle;
  return *ref.entry_->dir;
}

void KeptDirs::sweep() {
  std::lock_guard lock(mu_);
  std::erase_if(dirs_, [](const auto& kv) { return !kv.second.used; });
  for (auto& [path, e] : dirs_) e.used = false;
  cycle_.fetch_add(1, std::memory_order_relaxed);
}

std::size_t KeptDirs::descriptors() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [path, e] : dirs_) n += e.dir->descriptors();
  return n;
}

}  // namespace rdma::sysfs
