// Collector "hw_counters": every driver's hw_counters (port and device level) as raw series,
// vendor-normalised congestion/transport metrics from the per-driver tables, lifespan as a
// gauge, 32-bit mlx5 Q counters extended across wraps. Port counters come from one RDMA netlink
// STAT_GET request per port when the kernel has RDMA netlink, from sysfs otherwise; the output
// is the same either way (netlink also shows the optional counters the user enabled).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectors/hw_counters/wrap_extender.h"
#include "exporter/collector.h"
#include "sources/sysfs/infiniband_class.h"

namespace rdma::collectors::hw_counters {

// A port's counters in one bulk read. The real one is RDMA netlink; tests inject their own.
class BulkPortReader {
 public:
  virtual ~BulkPortReader() = default;
  // Counters of `device` port `port`, or an error (errno-style, 0 = success).
  struct Reply {
    int error = 0;
    std::vector<sysfs::CounterReading> counters;
  };
  virtual Reply read_port(const std::string& device, std::uint32_t port) = 0;
  // Requests sent so far.
  virtual std::uint64_t requests() const = 0;
};

enum class NetlinkMode : std::uint8_t { kOff, kAuto, kOn };

struct Settings {
  NetlinkMode netlink = NetlinkMode::kAuto;
  bool wrap_extension = true;
};

// Opens RDMA netlink; nullptr (and `err`) when the kernel has none.
std::unique_ptr<BulkPortReader> open_netlink_reader(int& err);

class HwCountersCollector final : public exporter::Collector {
 public:
  // `bulk` is used when non-null; with NetlinkMode::kOn/kAuto and a null `bulk`, RDMA netlink is
  // opened lazily at the first scrape (once; kAuto stays on sysfs quietly when it is missing).
  HwCountersCollector(Settings settings, std::unique_ptr<BulkPortReader> bulk = nullptr);
  void collect(const exporter::ScrapeContext& ctx, exporter::MetricSink& out) override;

 private:
  // One device's hw_counters as read, before anything is emitted.
  struct DeviceReadings {
    std::optional<std::vector<sysfs::CounterReading>> device;  // absent: no device-level directory
    std::vector<std::vector<sysfs::CounterReading>> ports;     // one per DeviceModel::ports entry
  };
  static constexpr unsigned kMaxThreads = 4;  // devices read at once (sysfs)

  // Thread-safe across devices when RDMA netlink is not in use.
  DeviceReadings read_device(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev);
  std::vector<sysfs::CounterReading> read_port(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev,
                                               const model::PortModel& port, const std::string& dir);

  Settings settings_;
  std::unique_ptr<BulkPortReader> bulk_;
  bool bulk_tried_ = false;
  int open_errno_ = 0;
  std::atomic<std::uint64_t> sysfs_reads_{0};
  WrapExtender wrap_;
};

}  // namespace rdma::collectors::hw_counters
