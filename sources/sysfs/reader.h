// Reads files under a configurable sysfs root (--path.sysfs) with plain open/read/close: one
// system call each, no iostreams, so a scrape costs little more than the kernel's own work.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sources/common/result.h"

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
  // Names only, sorted, as list_names().
  Result<std::vector<std::string>> names() const;
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// What a directory is, as far as a cache of what was read in it can tell: device, inode, link
// count, change and modification times. Creating, removing or renaming an entry changes a
// directory's mtime and ctime on tmpfs and on kernfs alike; a device registered again is a new
// kernfs node (new inode). The link count is the number of subdirectories + 2 on both, so a
// subdirectory added or removed is seen even where a directory's times are not kept.
struct DirIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  nlink_t nlink = 0;
  timespec mtime{};
  timespec ctime{};
  bool operator==(const DirIdentity& o) const;
  // From a stat of the path (symlinks followed), or of an open descriptor.
  static Result<DirIdentity> of(const std::string& path);
  static Result<DirIdentity> of(int fd);
  // Of `relative`, looked up from the open directory dir_fd (symlinks followed).
  static Result<DirIdentity> of(int dir_fd, const char* relative);
  // File times have coarse, clock-tick granularity: a change within the last racy_seconds may
  // hide a second change in the same tick, so such a directory is not trusted ("racy", as git
  // says) until it has been still that long.
  bool settled(int racy_seconds) const;
};

// A directory whose files stay open across scrapes and are re-read with pread(fd, buf, n, 0):
// one system call per file instead of open/read/close. On sysfs a read at offset 0 re-runs the
// attribute's show() (kernfs seq_file rewinds to the first record when the read position is 0), so
// the value is as fresh as a new open's; regular files (fixture trees) read their current content.
//
// When a kept descriptor would read the wrong thing, and how that is seen:
//  - the device or port goes away (sysfs): kernfs answers ENODEV on the kept descriptor; the file
//    is reopened once, which then fails as a new open would (ENOENT).
//  - the directory is a different one now (device re-registered under the same name, a fixture
//    tree renamed into place, a file replaced by rename or unlink and create): refresh() stats the
//    path once per scrape and compares device, inode, mtime and ctime with the directory the
//    descriptors were opened in. Creating, removing or renaming an entry changes the directory's
//    mtime and ctime on tmpfs and on kernfs alike, so a replaced file is reopened.
//  - the change falls in the same timestamp tick as the one seen (file times have coarse, clock-tick
//    granularity): a directory changed within the last kRacySeconds is not trusted, and refresh()
//    reopens it on every scrape until it has been still that long ("racy" entries, as git does).
//  - a file's mode changes after it was opened (chmod): an open descriptor keeps reading, as any
//    open file does; the directory is untouched and nothing is reopened.
// Each kept file costs one descriptor: docs/deployment.md gives the count per port; the exporter
// raises its RLIMIT_NOFILE soft limit to the hard one at start (exporter/app.cpp).
class KeptDir {
 public:
  static constexpr int kRacySeconds = 2;

  // racy_seconds: kRacySeconds but in tests, which set the directory's times themselves.
  explicit KeptDir(std::string path, int racy_seconds = kRacySeconds)
      : path_(std::move(path)), racy_seconds_(racy_seconds) {}
  KeptDir(const KeptDir&) = delete;
  KeptDir& operator=(const KeptDir&) = delete;
  ~KeptDir() { close_all(); }

  // Checks that the path still names the directory the descriptors were opened in and reopens it
  // otherwise. Call once per scrape before reading; an error is the directory's own (kNotFound: gone).
  // parent: a directory above this one, refreshed in this scrape: the stat looks the rest of the
  // path up from its descriptor (a component or two instead of the whole path: on a 16-HCA host
  // the path walks of these stats cost more than the preads of all counters).
  // A directory found absent under a parent that has not been reopened since is still absent
  // (an entry added changes the parent's identity): it is not looked up again; one opened under a
  // parent not reopened since is still the one its name names: its own descriptor is stat'ed.
  // known: the directory's identity as stat'ed in this scrape already (model::PortModel::identity),
  // compared instead of a stat of its own.
  ReadError refresh(const KeptDir* parent = nullptr, const DirIdentity* known = nullptr);
  // Entry names, sorted, listed once per opening of the directory (valid until the next refresh()).
  Result<const std::vector<std::string>*> names();
  Result<std::string> read_file(const char* name);
  Result<std::string> read_attribute(const char* name);
  Result<std::uint64_t> read_u64(const char* name);
  // The i-th of names(): its descriptor is found by index, without hashing the name.
  Result<std::uint64_t> read_u64_at(std::size_t i);

  const std::string& path() const { return path_; }
  // Names the opening of the directory: what was read from it once may be kept while this stays
  // the same (a changed or racy directory is reopened, and that changes it). Unique in the process
  // (a KeptDir closed by a sweep and made again does not repeat an earlier one's); 0 while not open.
  std::uint64_t generation() const { return dir_fd_ >= 0 ? generation_ : 0; }
  // Descriptors held now: the directory's and its open files'.
  std::size_t descriptors() const;
  // Files opened (open + read) and files re-read with a kept descriptor (pread) since the last call.
  std::pair<std::uint64_t, std::uint64_t> take_counts() { return {std::exchange(opens_, 0), std::exchange(preads_, 0)}; }

 private:
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  void close_all();
  Result<int> file_fd(const char* name, bool reopen);
  // The file into buf (a page: sysfs attributes are at most one); its length. slot: where the
  // caller keeps the file's descriptor by index (-1 until opened), updated when it is (re)opened.
  Result<std::size_t> read_page(const char* name, char* buf, std::size_t cap, int* slot = nullptr);
  Result<std::uint64_t> u64_of_page(const char* name, int* slot);

  std::string path_;
  int racy_seconds_;
  int dir_fd_ = -1;
  ReadError dir_error_ = ReadError::kNotFound;
  int dir_errno_ = 0;
  DirIdentity identity_;
  bool racy_ = true;
  std::unordered_map<std::string, int, NameHash, std::equal_to<>> files_;
  std::vector<std::string> names_;
  std::vector<int> name_fds_;  // by index in names_, -1 until opened; owned by files_
  bool listed_ = false;
  std::uint64_t generation_ = 0;
  std::uint64_t absent_under_ = 0;  // the parent's generation() when this was found absent in it
  std::uint64_t opened_under_ = 0;  // the parent's generation() when this was opened below it
  std::uint64_t opens_ = 0;
  std::uint64_t preads_ = 0;
};

// The kept directories of one collector, by path. A directory a scrape did not ask for (device or
// port gone) is closed by sweep() at the end of that scrape. at() may be called from the threads of
// one collection at once; each path is used by one thread at a time (one device per thread).
class KeptDirs {
  struct Entry;

 public:
  // The directory, refreshed on its first use since the last sweep(); parent as in KeptDir::refresh.
  KeptDir& at(const std::string& path, const KeptDir* parent = nullptr, const DirIdentity* known = nullptr);
  // Where a caller last found a path's directory (a port's state keeps one per directory it
  // reads): at() through it finds the directory without hashing the path under the lock, while
  // no sweep() can have closed it (asked for in this cycle or the last). One Ref per path.
  class Ref {
    friend class KeptDirs;
    Entry* entry_ = nullptr;
    std::uint64_t cycle_ = 0;
  };
  KeptDir& at(Ref& ref, const std::string& path, const KeptDir* parent = nullptr, const DirIdentity* known = nullptr);
  void sweep();
  std::size_t descriptors() const;

 private:
  struct Entry {
    std::unique_ptr<KeptDir> dir;
    bool used = false;
  };
  Entry& entry(const std::string& path, const KeptDir* parent, const DirIdentity* known);
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> dirs_;  // node-based: an Entry stays where it is until erased
  std::atomic<std::uint64_t> cycle_{1};  // sweeps + 1
};

}  // namespace rdma::sysfs
