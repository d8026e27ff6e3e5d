// Collector "port": per-port PMA counters from sysfs (counters/, legacy counters_ext/), port
// and device attributes as gauges and _info series, the port's netdevs, and the attributes only
// verbs knows (MTU, active width and speed).
#include <atomic>
#include <chrono>
#include <memory>

#include "collectors/port/port_counters.h"
#include "exporter/collector.h"
#include "exporter/parallel.h"
#include "sources/sysfs/infiniband_class.h"
#include "sources/verbs/port_attributes.h"

namespace rdma::collectors::port {
namespace {

using exporter::Labels;
using exporter::MetricSink;
using sysfs::ReadError;

// Optional driver attributes simply do not exist on some drivers; that is not an error.
template <class T>
std::string text_or_empty(const sysfs::Result<T>& r) {
  if constexpr (std::is_same_v<T, std::string>) return r.ok() ? r.value : std::string();
  else return r.ok() ? r.value.name : std::string();
}

void report_unless_absent(exporter::ErrorReporter& errors, const sysfs::ReadError e, const std::string& path) {
  if (e != ReadError::kNone && e != ReadError::kNotFound) errors.report_read(e, path);
}

class PortCollector final : public exporter::Collector {
 public:
  PortCollector(bool use_verbs) : use_verbs_(use_verbs) {}

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    // Threads pay where reads are slow (mlx5 counters/ files are firmware commands); where the
    // last scrape's reads all took less than starting threads costs (kept descriptors on a
    // fixture tree or a driver answering from memory), the devices are read on this thread.
    const bool slow = last_work_ns_.load(std::memory_order_relaxed) > kThreadsWorthNs;
    std::atomic<std::uint64_t> work_ns{0};
    exporter::for_each_parallel(ctx.host.devices, slow ? kMaxThreads : 1, out,
                                [&](const model::DeviceModel& dev, MetricSink& s) {
                                  const auto t0 = std::chrono::steady_clock::now();
                                  collect_device(ctx, dev, s);
                                  for (const auto& port : dev.ports) collect_port(ctx, dev, port, s);
                                  work_ns += static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                                            std::chrono::steady_clock::now() - t0)
                                                                            .count());
                                });
    last_work_ns_.store(work_ns.load(), std::memory_order_relaxed);
    kept_.sweep();  // closes the files of devices and ports that are gone
  }

 private:
  void collect_device(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev, MetricSink& out) {
    auto a = sysfs::read_device_attributes(kept_.at(dev.path));
    for (auto [name, err] : {std::pair{"node_type", a.node_type.error}, {"node_guid", a.node_guid.error},
                             {"sys_image_guid", a.sys_image_guid.error}, {"fw_ver", a.fw_ver.error}})
      if (err != ReadError::kNone) ctx.errors.report_read(err, dev.path + "/" + name);
    for (auto [name, err] : {std::pair{"hca_type", a.hca_type.error}, {"hw_rev", a.hw_rev.error},
                             {"board_id", a.board_id.error}, {"node_desc", a.node_desc.error}})
      report_unless_absent(ctx.errors, err, dev.path + "/" + name);
    out.info("rdma_device_info",
             "RDMA device attributes: driver, node type, firmware, HCA type, board, GUIDs, node description. Always 1.",
             {{"device", dev.name},
              {"driver", dev.driver},
              {"node_type", text_or_empty(a.node_type)},
              {"fw_ver", text_or_empty(a.fw_ver)},
              {"hca_type", text_or_empty(a.hca_type)},
              {"hw_rev", text_or_empty(a.hw_rev)},
              {"board_id", text_or_empty(a.board_id)},
              {"node_guid", text_or_empty(a.node_guid)},
              {"sys_image_guid", text_or_empty(a.sys_image_guid)},
              {"node_desc", text_or_empty(a.node_desc)}});
  }

  void collect_port(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev, const model::PortModel& port,
                    MetricSink& out) {
    const Labels base{{"device", dev.name}, {"port", port.number_label}};
    auto with = [&base](std::string k, std::string v) {
      Labels l = base;
      l.emplace_back(std::move(k), std::move(v));
      return l;
    };
    out.info("rdma_port_info", "RDMA port: its link layer (InfiniBand, Ethernet or Unknown). Always 1.",
             with("link_layer", std::string(model::link_layer_label(port.link_layer))));
    for (const auto& nd : port.netdevs) {
      Labels l = with("netdev", nd.name);
      l.emplace_back("via", nd.via);
      out.info("rdma_port_netdev_info",
               "Network device behind an RDMA port; via tells how it was found (gid_attrs, device_net, parent). Always 1.",
               std::move(l));
    }

    auto a = sysfs::read_port_attributes(kept_.at(port.path));
    auto gauge_if = [&](const char* file, const char* name, const char* help, const auto& r, auto value_of) {
      if (r.ok()) out.gauge(name, help, base, static_cast<double>(value_of(r.value)));
      else report_unless_absent(ctx.errors, r.error, port.path + "/" + file);
    };
    auto id = [](const sysfs::EnumValue& e) { return e.id; };
    auto same = [](std::uint64_t v) { return v; };
    gauge_if("state", "rdma_port_state", "Logical port state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.", a.state, id);
    gauge_if("phys_state", "rdma_port_physical_state",
             "Physical port state: 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery, 7 PhyTest.",
             a.phys_state, id);
    gauge_if("rate", "rdma_port_rate_bytes_per_second", "Port data rate from the rate attribute, in bytes per second.",
             a.rate, [](const sysfs::Rate& r) { return r.bytes_per_second; });
    if (a.rate.ok() && a.rate.value.width > 0)
      out.gauge("rdma_port_link_width_lanes", "Link width in lanes, from the rate attribute.", base, a.rate.value.width);
    gauge_if("lid", "rdma_port_lid", "Local identifier of the port (0 on RoCE).", a.lid, same);
    gauge_if("sm_lid", "rdma_port_sm_lid", "LID of the subnet manager the port is managed by (0 on RoCE).", a.sm_lid, same);

    collect_counters(ctx, dev, port, base, out);
    if (use_verbs_) collect_verbs(dev, port, base, out);

    // What this port cost the kernel in this scrape: on mlx5 each counters/ read is a firmware
    // command, so the count is the cost. The port's own attribute files and counters/ and
    // counters_ext/, not the device attributes nor the shared discovery.
    std::uint64_t opens = 0, preads = 0;
    for (const std::string& d : {port.path, port.path + "/counters", port.path + "/counters_ext"}) {
      auto [o, p] = kept_.at(d).take_counts();
      opens += o;
      preads += p;
    }
    const char* help = "Files the port collector read for the port in this scrape, by method: open (opened and read: "
                       "the first scrape, or a file reopened) and pread (re-read through a descriptor kept open).";
    out.gauge("rdma_port_file_reads", help, with("method", "open"), static_cast<double>(opens));
    out.gauge("rdma_port_file_reads", help, with("method", "pread"), static_cast<double>(preads));
  }

  void collect_counters(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev,
                        const model::PortModel& port, const Labels& base, MetricSink& out) {
    const std::string dir = port.path + "/counters";
    auto counters = sysfs::read_counter_dir(kept_.at(dir));
    // Kernels before 4.20 create counters/ for a device without a PMA too (i40iw) and print
    // "N/A (no PMA)" in every file: like a missing directory, that is what the port is.
    bool all_not_available = counters.ok() && !counters.value.empty();
    if (counters)
      for (const auto& c : counters.value) all_not_available &= c.value.error == ReadError::kNotAvailable;
    const bool present = counters.ok() && !all_not_available;
    out.gauge("rdma_port_pma_counters_present",
              "1 when the port has PMA counters in counters/ (rxe, irdma, efa and other drivers have none; old "
              "kernels print N/A in every file instead).",
              base, present ? 1.0 : 0.0);
    if (present || all_not_available || counters.error == ReadError::kNotFound)
      ctx.errors.capability("pma_counters", dev.name + "/" + port.number_label, present,
                            all_not_available ? dir + " reads \"N/A (no PMA)\": the driver has no PMA"
                                              : dir + " does not exist: the driver has no PMA");
    if (!counters) {
      report_unless_absent(ctx.errors, counters.error, dir);
    } else if (!all_not_available) {
      bool has_unicast = false;
      for (const auto& c : counters.value)
        if (c.name == "unicast_xmit_packets") has_unicast = true;
      const std::uint8_t data_width = data_counter_width(has_unicast, dev.driver);
      for (const auto& c : counters.value) {
        const CounterDef* def = find_counter(c.name);
        emit_counter(ctx, dir, c, def, def && def->width == 0 ? data_width : 0, base, out);
      }
    }
    const std::string legacy_dir = port.path + "/counters_ext";
    auto legacy = sysfs::read_counter_dir(kept_.at(legacy_dir));
    if (legacy) {
      for (const auto& c : legacy.value) emit_counter(ctx, legacy_dir, c, find_legacy_counter(c.name), 64, base, out);
    } else {
      report_unless_absent(ctx.errors, legacy.error, legacy_dir);
    }
  }

  // dir: the counter's directory; its path is only built for an error report.
  static void emit_counter(const exporter::ScrapeContext& ctx, const std::string& dir, const sysfs::CounterReading& c,
                           const CounterDef* def, std::uint8_t width_override, const Labels& base, MetricSink& out) {
    if (!c.value) {
      // One "N/A" file is a counter the driver cannot provide, not a failed read.
      if (c.value.error != ReadError::kNotAvailable) ctx.errors.report_read(c.value.error, dir + "/" + c.name);
      return;
    }
    const std::uint64_t v = c.value.value;
    if (!def) {
      // A counter this version does not know yet: exported under its kernel name.
      Labels l = base;
      l.emplace_back("counter", c.name);
      out.counter("rdma_port_pma_other_total", "PMA counter files not known to this exporter version, by file name.",
                  std::move(l), v);
      return;
    }
    if (def->scale == 1) out.counter(def->metric, def->help, base, v);
    else if (v <= UINT64_MAX / def->scale) out.counter(def->metric, def->help, base, v * def->scale);
    else out.add(def->metric, exporter::MetricType::kCounter, def->help, base, static_cast<double>(v) * def->scale);

    const std::uint8_t width = def->width ? def->width : width_override;
    if (width > 0 && width < 64) {
      Labels l = base;
      l.emplace_back("counter", std::string(def->file));
      out.gauge("rdma_port_pma_saturated",
                "1 when a PMA counter narrower than 64 bits sits at its maximum (it no longer counts until reset).",
                std::move(l), v >= max_for_width(width) ? 1.0 : 0.0);
    }
  }

  void collect_verbs(const model::DeviceModel& dev, const model::PortModel& port, const Labels& base, MetricSink& out) {
    auto attrs = verbs_.query(dev.name, port.number);
    if (!attrs) return;  // no device access: these are simply absent
    if (attrs->active_mtu_bytes)
      out.gauge("rdma_port_active_mtu_bytes", "Active path MTU of the port (ibv_query_port).", base, attrs->active_mtu_bytes);
    if (attrs->max_mtu_bytes)
      out.gauge("rdma_port_max_mtu_bytes", "Largest MTU the port supports (ibv_query_port).", base, attrs->max_mtu_bytes);
    if (attrs->active_width_lanes)
      out.gauge("rdma_port_active_width_lanes", "Active link width in lanes (ibv_query_port).", base, attrs->active_width_lanes);
    if (attrs->lane_speed_bits_per_second)
      out.gauge("rdma_port_active_lane_speed_bits_per_second", "Active signalling rate per lane (ibv_query_port).", base,
                static_cast<double>(attrs->lane_speed_bits_per_second));
  }

  static constexpr unsigned kMaxThreads = 4;  // devices read at once
  // Starting and joining three threads costs about 100 us on a loaded host: below 2 ms of reads
  // one thread is faster (bench/port/bench_port.py: 1.3 x the raw floor against 2.0 x with four).
  static constexpr std::uint64_t kThreadsWorthNs = 2'000'000;
  std::atomic<std::uint64_t> last_work_ns_{UINT64_MAX};  // the first scrape: assume slow reads
  bool use_verbs_;
  // The attribute and counter files stay open between scrapes (sources/sysfs/reader.h says when
  // they are reopened): 9 descriptors per device, 6 + 1 + one per counters/ file (22 on mlx5) per port.
  sysfs::KeptDirs kept_;
  verbs::PortAttributeReader verbs_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "port",
    .help = "Per-port PMA counters, port and device attributes, netdevs (sysfs) and MTU/width/speed (verbs).",
    .enabled_by_default = true,
    .settings = {{"verbs", exporter::OptionType::kString, "auto",
                  "Query ibv_query_port for MTU/width/speed: auto (only when --path.sysfs is /sys), true or false."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g)
        -> std::unique_ptr<exporter::Collector> {
      const std::string mode = s.choice("verbs", {"auto", "true", "false"});
      // verbs sees the real host; with a fake sysfs tree it would describe other devices.
      return std::make_unique<PortCollector>(mode == "true" || (mode == "auto" && g.sysfs_root == "/sys"));
    },
});

}  // namespace rdma::collectors::port
