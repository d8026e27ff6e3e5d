#include "collectors/hw_counters/hw_counters_collector.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

#include "collectors/hw_counters/driver_tables.h"
#include "exporter/parallel.h"
#include "sources/netlink/rdma_client.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::hw_counters {
namespace {

using exporter::Labels;
using exporter::MetricSink;

constexpr std::string_view kLifespan = "lifespan";

class NetlinkReader final : public BulkPortReader {
 public:
  explicit NetlinkReader(std::unique_ptr<netlink::Client> c) : client_(std::move(c)) {}
  Reply read_port(const std::string& device, std::uint32_t port) override {
    auto r = client_->read_port(device, port);
    Reply out;
    out.error = r.error;
    out.counters.reserve(r.counters.size());
    for (auto& c : r.counters)
      out.counters.push_back({std::move(c.name), Result<std::uint64_t>::success(c.value)});
    return out;
  }
  std::uint64_t requests() const override { return client_->requests(); }

 private:
  std::unique_ptr<netlink::Client> client_;
};

// Extended values of one level's counters, by kernel name, for the normalised metrics.
using Values = std::map<std::string, std::uint64_t, std::less<>>;

struct Level {
  const char* counter;        // family of the counters
  const char* counter_help;
  const char* gauge;          // family of the gauge-typed counters
  const char* gauge_help;
  const char* lifespan;       // family of lifespan
  const char* lifespan_help;
  const char* wraps;
  const char* wraps_help;
};

constexpr Level kPortLevel{
    "rdma_hw_counters_total",
    "Driver hw_counters of a port (ports/N/hw_counters or RDMA netlink), by the kernel's counter name; 32-bit mlx5 Q counters extended across wraps.",
    "rdma_hw_counters_level",
    "Driver hw_counters of a port that are levels, not counts (bnxt_re active_*/watermark_*, mana current_rate, ...).",
    "rdma_hw_counters_lifespan_seconds",
    "Lifetime of the kernel's cached hw_counters snapshot of the port (lifespan, ms converted to seconds).",
    "rdma_hw_counters_wraps_total",
    "Wraps of a narrower-than-64-bit port hw counter seen by this exporter (each adds 2^width to rdma_hw_counters_total); only counters that wrapped.",
};
constexpr Level kDeviceLevel{
    "rdma_hw_device_counters_total",
    "Driver hw_counters of a device (<dev>/hw_counters), by the kernel's counter name.",
    "rdma_hw_device_counters_level",
    "Device-level driver hw_counters that are levels, not counts.",
    "rdma_hw_device_counters_lifespan_seconds",
    "Lifetime of the kernel's cached device-level hw_counters snapshot (lifespan, ms converted to seconds).",
    "rdma_hw_device_counters_wraps_total",
    "Wraps of a narrower-than-64-bit device-level hw counter seen by this exporter; only counters that wrapped.",
};

}  // namespace

std::unique_ptr<BulkPortReader> open_netlink_reader(int& err) {
  // A kernel that never answers must not hold the collector forever (the scrape timeout
  // reports it; this bounds the thread).
  auto c = netlink::Client::open(std::chrono::seconds(10), err);
  if (!c) return nullptr;
  return std::make_unique<NetlinkReader>(std::move(c));
}

HwCountersCollector::HwCountersCollector(Settings settings, std::unique_ptr<BulkPortReader> bulk)
    : settings_(settings), bulk_(std::move(bulk)), bulk_tried_(bulk_ != nullptr) {}

std::vector<sysfs::CounterReading> HwCountersCollector::read_port(const exporter::ScrapeContext& ctx,
                                                                  const model::DeviceModel& dev,
                                                                  const model::PortModel& port, const std::string& dir) {
  if (bulk_ && settings_.netlink != NetlinkMode::kOff) {
    // The directory tells whether the port has hw_counters at all (a stat, not a read).
    if (!sysfs::exists(dir)) return {};
    auto r = bulk_->read_port(dev.name, port.number);
    if (r.error == 0) {
      auto readings = std::move(r.counters);
      // lifespan is a sysfs attribute, not a counter: one read keeps the output identical.
      ++sysfs_reads_;
      auto life = sysfs::read_u64(dir + "/lifespan");
      if (life) readings.push_back({std::string(kLifespan), life});
      else if (life.error != ReadError::kNotFound) ctx.errors.report_read(life.error, dir + "/lifespan");
      std::sort(readings.begin(), readings.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
      return readings;
    }
    ctx.errors.report("netlink", dev.name + "/" + port.number_label,
                      "RDMA netlink STAT_GET for " + dev.name + " port " + port.number_label + " failed (" +
                          std::strerror(r.error) + "); reading sysfs");
  }
  auto r = sysfs::read_counter_dir(dir);
  if (!r) {
    if (r.error != ReadError::kNotFound) ctx.errors.report_read(r.error, dir);
    return {};
  }
  sysfs_reads_ += r.value.size();
  return std::move(r.value);
}

HwCountersCollector::DeviceReadings HwCountersCollector::read_device(const exporter::ScrapeContext& ctx,
                                                                   const model::DeviceModel& dev) {
  DeviceReadings r;
  const std::string dir = dev.path + "/hw_counters";
  auto d = sysfs::read_counter_dir(dir);
  if (d) {
    sysfs_reads_ += d.value.size();
    r.device = std::move(d.value);
  } else if (d.error != ReadError::kNotFound) {
    ctx.errors.report_read(d.error, dir);
  }
  r.ports.reserve(dev.ports.size());
  for (const auto& port : dev.ports) r.ports.push_back(read_port(ctx, dev, port, port.path + "/hw_counters"));
  return r;
}

void HwCountersCollector::collect(const exporter::ScrapeContext& ctx, MetricSink& out) {
  if (settings_.netlink != NetlinkMode::kOff && !bulk_tried_) {
    bulk_tried_ = true;
    bulk_ = open_netlink_reader(open_errno_);
  }
  if (!bulk_ && settings_.netlink == NetlinkMode::kOn)
    ctx.errors.report("netlink_unavailable", "netlink",
                      std::string("RDMA netlink unavailable (") + std::strerror(open_errno_) +
                          "); reading hw_counters from sysfs");
  std::set<std::string> live;

  // Emits one level's readings; fills `values` with the (extended) counter values.
  auto emit = [&](const Level& lv, const model::DeviceModel& dev, const std::string* port, const std::string& dir,
                  const std::vector<sysfs::CounterReading>& readings, Values& values) {
    Labels base{{"device", dev.name}};
    if (port) base.emplace_back("port", *port);
    live.insert(WrapExtender::live_key(dev.name, port ? *port : std::string()));
    const DriverTable* table = table_for(dev.driver);
    for (const auto& c : readings) {
      if (!c.value) {
        ctx.errors.report_read(c.value.error, dir + "/" + c.name);
        continue;
      }
      const std::uint64_t raw = c.value.value;
      if (raw == UINT64_MAX && table && table->all_ones_invalid) {
        // The driver's "could not decode this value", not a count: no sample (the normalised
        // metrics built on it are skipped too), one error per scrape, logged once per counter.
        ctx.errors.report("invalid_value", dir + "/" + c.name,
                          dir + "/" + c.name + " reads 2^64-1, which " + dev.driver +
                              " writes for a value it could not decode; not exported");
        continue;
      }
      if (c.name == kLifespan) {
        out.gauge(lv.lifespan, lv.lifespan_help, base, static_cast<double>(raw) / 1000.0);
        continue;
      }
      Labels l = base;
      l.emplace_back("counter", c.name);
      if (is_gauge(dev.driver, c.name)) {
        out.gauge_u64(lv.gauge, lv.gauge_help, std::move(l), raw);
        continue;
      }
      const std::uint8_t width = counter_width(dev.driver, c.name);
      const bool inferred = table && table->runtime_widths;
      std::uint64_t v = raw;
      if (settings_.wrap_extension && (width < 64 || inferred)) {
        const WrapExtender::Key key{dev.name, port ? *port : std::string(), c.name};
        v = inferred ? wrap_.extend_inferred(key, raw) : wrap_.extend(key, width, raw);
        // Only counters that wrapped: a zero for each of the ~60 Q counters of every port would be
        // a fifth of a node's samples and say nothing (the exposition budget in docs/metrics.md).
        if (const std::uint64_t wraps = wrap_.wraps(key)) out.counter(lv.wraps, lv.wraps_help, l, wraps);
      }
      out.counter(lv.counter, lv.counter_help, std::move(l), v);
      values.emplace(c.name, v);
    }
  };

  // Read every device first, several at once (on mlx5 each sysfs file is a firmware command),
  // then emit in device order on this thread, which owns the wrap state. RDMA netlink is one
  // socket, so with it the reads stay on this thread too (one request per port is cheap).
  const auto& devices = ctx.host.devices;
  std::vector<DeviceReadings> reads(devices.size());
  const bool netlink = bulk_ && settings_.netlink != NetlinkMode::kOff;
  exporter::parallel_for(devices.size(), netlink ? 1 : kMaxThreads,
                         [&](std::size_t i) { reads[i] = read_device(ctx, devices[i]); });

  for (std::size_t i = 0; i < devices.size(); ++i) {
    const model::DeviceModel& dev = devices[i];
    Values device_values;
    if (reads[i].device) emit(kDeviceLevel, dev, nullptr, dev.path + "/hw_counters", *reads[i].device, device_values);

    const auto rows = mapping_for(dev.driver);
    for (std::size_t p = 0; p < dev.ports.size(); ++p) {
      const model::PortModel& port = dev.ports[p];
      const auto& readings = reads[i].ports[p];
      Values port_values;
      if (!readings.empty()) emit(kPortLevel, dev, &port.number_label, port.path + "/hw_counters", readings, port_values);

      // Device-level counters stand for the port only on single-port devices (mana, efa).
      const Values* device_scope = dev.ports.size() == 1 ? &device_values : nullptr;
      std::array<bool, static_cast<std::size_t>(Kind::kCount)> done{};
      for (const auto& row : rows) {
        auto& is_done = done[static_cast<std::size_t>(row.kind)];
        if (is_done) continue;
        const Values* src = row.scope == Scope::kPort ? &port_values : device_scope;
        if (!src) continue;
        std::uint64_t sum = 0;
        bool all = true, overflow = false;
        for (auto name : row.counters) {
          if (name.empty()) continue;
          auto it = src->find(name);
          if (it == src->end()) {
            all = false;
            break;
          }
          if (it->second > UINT64_MAX - sum) overflow = true;
          sum += it->second;
        }
        if (!all) continue;
        is_done = true;
        const KindDef& k = kind_def(row.kind);
        if (overflow) {
          ctx.errors.report("overflow", dev.name + "/" + port.number_label + "/" + std::string(k.metric),
                            "sum of " + std::string(row.counters[0]) + "... exceeds 2^64 for " + dev.name + " port " +
                                port.number_label + "; " + std::string(k.metric) + " skipped");
          continue;
        }
        Labels l{{"device", dev.name}, {"port", port.number_label}};
        if (!k.kind_label.empty()) l.emplace_back("kind", std::string(k.kind_label));
        out.counter(k.metric, k.help, std::move(l), sum);
      }
    }
  }
  if (settings_.wrap_extension) wrap_.retain(live);

  const char* reads_help =
      "hw_counters reads by this collector: sysfs file reads, RDMA netlink requests (one STAT_GET per port and "
      "scrape, plus device-index dumps).";
  out.counter("rdma_hw_counters_reads_total", reads_help, {{"method", "netlink"}}, bulk_ ? bulk_->requests() : 0);
  out.counter("rdma_hw_counters_reads_total", reads_help, {{"method", "sysfs"}}, sysfs_reads_);
}

RDMA_REGISTER_COLLECTOR({
    .name = "hw_counters",
    .help = "Driver hw_counters of every RDMA device (raw and vendor-normalised congestion/transport metrics), via RDMA netlink or sysfs.",
    .enabled_by_default = true,
    .settings = {{"netlink", exporter::OptionType::kString, "auto",
                  "Read port counters with one RDMA netlink request per port: auto (when --path.sysfs is /sys and the "
                  "kernel has RDMA netlink), true (report when unavailable) or false (sysfs only)."},
                 {"wrap-extension", exporter::OptionType::kBool, "true",
                  "Extend narrow counters across wraps into monotonic 64-bit totals: 32-bit mlx5 Q counters, ionic's "
                  "firmware counters (width inferred from the values seen)."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g)
        -> std::unique_ptr<exporter::Collector> {
      const std::string mode = s.choice("netlink", {"auto", "true", "false"});
      Settings st;
      // Netlink sees the real host; with a fake sysfs tree it would describe other devices.
      st.netlink = mode == "true"    ? NetlinkMode::kOn
                   : mode == "false" ? NetlinkMode::kOff
                   : g.sysfs_root == "/sys" ? NetlinkMode::kAuto
                                            : NetlinkMode::kOff;
      st.wrap_extension = s.boolean("wrap-extension");
      return std::make_unique<HwCountersCollector>(st);
    },
});

}  // namespace rdma::collectors::hw_counters
