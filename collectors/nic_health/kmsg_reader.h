// Optional kernel-log reader (off by default; /dev/kmsg needs CAP_SYSLOG when
// kernel.dmesg_restrict=1): counts the driver and firmware faults the node-health agents grep for
// (mlx5 command timeouts, health poll failures, module high temperature, insufficient slot
// power, NETDEV WATCHDOG). The patterns are a data table (kKmsgPatterns); nothing of a line is
// kept but the table row it matched and the RDMA device it names (a PCI address, an RDMA device
// or a netdev that the host model knows), so labels come from the table and the model only.
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

struct KmsgPattern {
  const char* fault;  // the `fault` label
  const char* regex;  // ECMAScript, matched anywhere in the message
};
extern const std::vector<KmsgPattern> kKmsgPatterns;

// Pure: the message text of one /dev/kmsg record "<prio>,<seq>,<usec>,<flags>[,...];<text>"
// (Documentation/ABI/testing/dev-kmsg); nullopt for a continuation line (" KEY=value") or a
// line that is not a record.
std::optional<std::string_view> kmsg_message(std::string_view line);

// The names a line may use for an RDMA device -> that device (PCI address, RDMA device, netdev).
using DeviceNames = std::map<std::string, std::string, std::less<>>;

class KmsgMatcher {
 public:
  KmsgMatcher();
  // The table rows `message` matches (indices into kKmsgPatterns), and the device it names.
  std::vector<std::size_t> match(std::string_view message) const;
  static std::string device_of(std::string_view message, const DeviceNames& names);

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
