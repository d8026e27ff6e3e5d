// Turns counters narrower than 64 bits (mlx5 Q counters: 32) into monotonic 64-bit totals.
//
// Rule, per (device, port, counter): the first value seen is exported as is. Afterwards a value
// below the previous one means the hardware counter wrapped once: 2^width is added to the
// series' offset. Exported value = offset + raw. A raw value >= 2^width means the counter is not
// that narrow here (e.g. values kept from bound `rdma statistic` counters are added by the
// kernel): the series is then passed through unchanged from that point on.
// Limits: more than one wrap between two scrapes is counted as one (scrape well below the
// wrap period: 2^32 at 10 M/s is ~7 min); a counter reset the exporter does not see as the
// device or port vanishing (driver reload between two scrapes) is taken for a wrap.
// State lives in memory: it is dropped when a device/port is missing from a scrape, and on an
// exporter restart the series restart at the raw value, which Prometheus treats as a counter
// reset (rate()/increase() stay correct apart from that one reset).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace rdma::collectors::hw_counters {

class WrapExtender {
 public:
  struct Key {
    std::string device;
    std::string port;  // "" for device-level counters
    std::string counter;
    bool operator<(const Key& o) const {
      return std::tie(device, port, counter) < std::tie(o.device, o.port, o.counter);
    }
  };

  // The extended value of `raw` for a counter `width` bits wide (64: returned unchanged).
  std::uint64_t extend(const Key& key, std::uint8_t width, std::uint64_t raw);
  // The same for a counter whose width the driver knows but sysfs does not show (ionic: the
  // firmware declares 8, 16, 32 or 64 bits per counter). The width is the smallest of 8/16/32/64
  // that holds every value this series has shown; a value below the previous one is one wrap of
  // that width only when the previous value was in the upper half of it (a wrap passes there; a
  // reset to 0 from a low value does not), else a reset that Prometheus sees as one. A counter
  // that has shown a value >= 2^32 is 64-bit and passed through. Limit: a counter that wraps
  // between two scrapes without ever having been seen above the lower widths is taken for the
  // narrower one (a 32-bit counter seen at 40,000 and next at 5 is counted as one 16-bit wrap).
  std::uint64_t extend_inferred(const Key& key, std::uint64_t raw);
  // Wraps seen for this series since it was first seen (0 for unknown series).
  std::uint64_t wraps(const Key& key) const;
  // Drops the state of every device/port not in `live` ("device\nport" strings; port "" for
  // device level).
  void retain(const std::set<std::string>& live);
  std::size_t size() const { return state_.size(); }

  static std::string live_key(const std::string& device, const std::string& port) { return device + "\n" + port; }

 private:
  struct State {
    std::uint64_t last = 0;
    std::uint64_t offset = 0;
    std::uint64_t wraps = 0;
    bool passthrough = false;
    std::uint64_t max_seen = 0;  // extend_inferred only
  };
  std::map<Key, State> state_;
};

}  // namespace rdma::collectors::hw_counters
