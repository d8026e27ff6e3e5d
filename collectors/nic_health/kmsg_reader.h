// Optional kernel-log reader (off by default; /dev/kmsg needs CAP_SYSLOG when
// kernel.dmesg_restrict=1): counts the driver and firmware faults the node-health agents grep for
// (mlx5 command timeouts, health poll failures, module high temperature, insufficient slot
// power, NETDEV WATCHDOG). The patterns are a data table (kKmsgPatterns); nothing of a line is
// kept but the table row it matched and the RDMA device it names, so labels come from the table
// and the model only.
//
// Only the kernel's own driver lines count, never text a user can put in the log: a record a
// process wrote to /dev/kmsg has a facility other than 0 (devkmsg_write() in
// kernel/printk/printk.c forces LOG_USER unless the writer names another non-zero one), and a
// kernel line that quotes user-chosen text (a segfault's or trap's task name and file name, an
// audit record) does not start with a driver's dev_printk() prefix "<driver> <PCI address>: " or
// "<driver> <PCI address> <netdev>: " (a task name is at most 15 bytes) nor carry the
// " DEVICE=+pci:<address>" property the kernel attaches to that device's lines. The device is the
// one of that prefix (its PCI address looked up in the model), never a word of the text.
//
// A background thread reads records as they are written (from the end of the ring at start:
// counts are since the reader started), with a non-blocking descriptor and poll() with a short
// timeout so that stop() is prompt; a scrape only copies the counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace rdma::collectors::nic_health {

// Which lines a row is matched on.
enum class KmsgSource : std::uint8_t {
  kDriver,     // a dev_printk()/netdev_printk() line of `driver` (any driver when null), with the
               // kernel's DEVICE property naming the same PCI function; regex on the text after the prefix
  kNetdevCore, // the networking core's own line with no device prefix (regex on the whole text):
               // capture 1 a netdev name, capture 2 its parent's driver (empty for a virtual netdev)
};
struct KmsgPattern {
  const char* fault;  // the `fault` label
  KmsgSource source;
  const char* driver;  // kDriver: the driver name of the prefix, nullptr for any
  const char* regex;   // ECMAScript
};
extern const std::vector<KmsgPattern> kKmsgPatterns;

// One /dev/kmsg record (Documentation/ABI/testing/dev-kmsg): "<prio>,<seq>,<usec>,<flags>[,...];
// <text>" and its continuation lines " KEY=value" (the device properties of dev_printk lines).
struct KmsgRecord {
  unsigned facility = 0;  // prio >> 3: 0 for the kernel's own lines, 1 (LOG_USER) or more for writes
  unsigned level = 0;     // prio & 7
  std::string_view text;
  std::string_view device;  // the DEVICE property ("+pci:0000:08:00.0"), empty when none
};
// Pure: the record whose header line starts `lines` (its continuation lines following it);
// nullopt for a line that is not a record header.
std::optional<KmsgRecord> kmsg_record(std::string_view lines);
// The message text of one record header line; nullopt for a continuation line (" KEY=value") or
// a line that is not a record.
std::optional<std::string_view> kmsg_message(std::string_view line);

// The prefix dev_printk() and netdev_printk()/ibdev_printk() put before a driver's message:
// "<driver> <PCI address>: ", "<driver> <PCI address> <name>[ (<state>)]: " (drivers/base/core.c
// __dev_printk(), net/core/dev.c __netdev_printk(), drivers/infiniband/core/device.c).
struct DriverPrefix {
  std::string_view driver, pci_address, name, rest;
};
std::optional<DriverPrefix> driver_prefix(std::string_view text);

// The names a line may use for an RDMA device -> that device (PCI address, RDMA device, netdev).
using DeviceNames = std::map<std::string, std::string, std::less<>>;

class KmsgMatcher {
 public:
  KmsgMatcher();
  struct Match {
    std::size_t row;     // index into kKmsgPatterns
    std::string device;  // the RDMA device of the line's own prefix, "" when the model has none
  };
  // The table rows a record matches, each with the device its prefix names.
  std::vector<Match> match(const KmsgRecord& record, const DeviceNames& names) const;

  // Longest text the patterns are run on: driver messages are one short line, and a bound keeps
  // the regex engine's work (and recursion) small whatever a record holds.
  static constexpr std::size_t kMaxMatchedText = 512;

 private:
  std::vector<std::regex> compiled_;
};

// (fault, device) -> count; device "" when the line names none the model knows.
using KmsgCounts = std::map<std::pair<std::string, std::string>, std::uint64_t>;

class KmsgReader {
 public:
  explicit KmsgReader(std::string path) : path_(std::move(path)) {}
  ~KmsgReader() { stop(); }
  void start();
  void stop();
  void set_device_names(DeviceNames names);
  struct Snapshot {
    bool started = false;  // start() has tried to open the log
    bool open = false;
    int open_errno = 0;
    std::uint64_t records = 0;
    KmsgCounts counts;
  };
  Snapshot snapshot() const;
  // Feeds one buffer as read from the device (records separated by newlines); public for tests.
  void consume(std::string_view buffer);

  // At most this many (fault, device) series: the devices come from the model, but a model can
  // change over time.
  static constexpr std::size_t kMaxSeries = 512;

 private:
  void run(int fd);
  std::string path_;
  KmsgMatcher matcher_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  DeviceNames names_;
  Snapshot snap_;
};

}  // namespace rdma::collectors::nic_health
