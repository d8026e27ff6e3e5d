// Collector "port": per-port PMA counters from sysfs (counters/, legacy counters_ext/) or, on
// InfiniBand ports with a usable umad device, from the port's PMA with MADs (mad_counters.h), port
// and device attributes as gauges and _info series, the port's netdevs, and the attributes only
// verbs knows (MTU, active width and speed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "collectors/port/mad_counters.h"
#include "collectors/port/port_counters.h"
#include "collectors/port/port_events.h"
#include "exporter/collector.h"
#include "exporter/parallel.h"
#include "sources/sysfs/infiniband_class.h"
#include "sources/verbs/port_attributes.h"

namespace rdma::collectors::port {
namespace {

using exporter::Labels;
using exporter::LabelSet;
using exporter::MetricSink;

// Optional driver attributes simply do not exist on some drivers; that is not an error.
template <class T>
std::string text_or_empty(const Result<T>& r) {
  if constexpr (std::is_same_v<T, std::string>) return r.ok() ? r.value : std::string();
  else return r.ok() ? r.value.name : std::string();
}

void report_unless_absent(exporter::ErrorReporter& errors, const ReadError e, const std::string& path) {
  if (e != ReadError::kNone && e != ReadError::kNotFound) errors.report_read(e, path);
}

// base + one more label, allocated once at its final size.
Labels with(const Labels& base, std::string_view k, std::string_view v) {
  Labels l;
  l.reserve(base.size() + 1);
  l = base;
  l.emplace_back(k, v);
  return l;
}

// What a port keeps between scrapes: its label set (rendered once, in the core's LabelSet) and
// directory paths, built once, and the counter values of the scrape (read before any is written,
// for the N/A check), reused. Its per-series extra labels (counter, method, source, link_layer)
// are names from static tables and string literals.
struct PortState {
  PortState() = default;
  PortState(const model::DeviceModel& dev, const model::PortModel& port)
      : base(Labels{{"device", dev.name}, {"port", port.number_label}}),
        counters_path(port.path + "/counters"),
        legacy_path(port.path + "/counters_ext") {}
  LabelSet base;
  std::string counters_path, legacy_path;
  std::vector<Result<std::uint64_t>> values;
  // counters/'s files' definitions by index in its listing, and whether it has the unicast
  // counters, looked up once per listing (the directory's KeptDir::generation()): comparing each
  // name against the tables at every scrape showed in the profile under bench/port.
  std::vector<const CounterDef*> defs;
  std::uint64_t defs_generation = 0;
  bool has_unicast = false;
  // Where kept_ has the port's directories: found without hashing their paths at each scrape.
  sysfs::KeptDirs::Ref dir_ref, counters_ref, legacy_ref;
  bool used = false;
};

// What a device keeps between scrapes: its attributes, of which those fixed for the device's
// lifetime are read once per opening of its directory (sysfs::read_device_attributes).
struct DeviceState {
  sysfs::DeviceAttributes attributes;
  // rdma_device_info's labels, rendered again only when an attribute can have changed: the fixed
  // ones were read again (another generation), or fw_ver or node_desc differ.
  LabelSet info;
  std::uint64_t info_generation = 0;
  std::string info_fw_ver, info_node_desc;
  sysfs::KeptDirs::Ref dir_ref;  // as PortState's
  bool used = false;
};

class PortCollector final : public exporter::Collector {
 public:
  PortCollector(bool use_verbs, CountersSource source, std::shared_ptr<verbs::DeviceEvents> events)
      : use_verbs_(use_verbs), source_(source), events_(use_verbs ? std::move(events) : nullptr) {
    if (events_) verbs_.share_contexts(events_);
  }

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    // Threads pay where reads are slow (mlx5 counters/ files are firmware commands); where the
    // last scrape's reads all took less than starting threads costs (kept descriptors on a
    // fixture tree or a driver answering from memory), the devices are read on this thread.
    const bool slow = last_work_ns_.load(std::memory_order_relaxed) > kThreadsWorthNs;
    // The ports' kept state is found or made here, on one thread; the device threads only read the map.
    for (const auto& dev : ctx.host.devices) {
      devices_[dev.path].used = true;
      for (const auto& port : dev.ports) {
        auto [it, fresh] = ports_.try_emplace(port.path);
        if (fresh) it->second = PortState(dev, port);
        it->second.used = true;
      }
    }
    take_events(ctx, out);
    // Most of the port families have one sample per port (a few have two).
    out.expect_per_family(ports_.size());
    std::atomic<std::uint64_t> work_ns{0};
    exporter::for_each_parallel(ctx.host.devices, slow ? kMaxThreads : 1, out,
                                [&](const model::DeviceModel& dev, MetricSink& s) {
                                  const auto t0 = std::chrono::steady_clock::now();
                                  DeviceState& dst = devices_.at(dev.path);
                                  collect_device(ctx, dev, dst, s);
                                  for (const auto& port : dev.ports)
                                    collect_port(ctx, dev, dst, port, ports_.at(port.path), s);
                                  work_ns += static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                                            std::chrono::steady_clock::now() - t0)
                                                                            .count());
                                });
    last_work_ns_.store(work_ns.load(), std::memory_order_relaxed);
    kept_.sweep();  // closes the files of devices and ports that are gone
    mad_.sweep();
    for (auto it = ports_.begin(); it != ports_.end();)
      it = std::exchange(it->second.used, false) ? std::next(it) : ports_.erase(it);
    for (auto it = devices_.begin(); it != devices_.end();)
      it = std::exchange(it->second.used, false) ? std::next(it) : devices_.erase(it);
  }

 private:
  // The device's directory, checked against the identity discovery stat'ed in this scrape where it has one.
  sysfs::KeptDir& device_dir(const model::DeviceModel& dev, DeviceState& st) {
    return kept_.at(st.dir_ref, dev.path, nullptr, dev.identity ? &*dev.identity : nullptr);
  }

  void collect_device(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev, DeviceState& st,
                      MetricSink& out) {
    sysfs::DeviceAttributes& a = st.attributes;
    sysfs::read_device_attributes(device_dir(dev, st), a);
    for (auto [name, err] : {std::pair{"node_type", a.node_type.error}, {"node_guid", a.node_guid.error},
                             {"sys_image_guid", a.sys_image_guid.error}, {"fw_ver", a.fw_ver.error}})
      if (err != ReadError::kNone) ctx.errors.report_read(err, dev.path + "/" + name);
    for (auto [name, err] : {std::pair{"hca_type", a.hca_type.error}, {"hw_rev", a.hw_rev.error},
                             {"board_id", a.board_id.error}, {"node_desc", a.node_desc.error}})
      report_unless_absent(ctx.errors, err, dev.path + "/" + name);
    std::string fw_ver = text_or_empty(a.fw_ver), node_desc = text_or_empty(a.node_desc);
    if (a.generation == 0 || a.generation != st.info_generation || fw_ver != st.info_fw_ver ||
        node_desc != st.info_node_desc) {
      st.info = LabelSet({{"device", dev.name},
                          {"driver", dev.driver},
                          {"node_type", text_or_empty(a.node_type)},
                          {"fw_ver", fw_ver},
                          {"hca_type", text_or_empty(a.hca_type)},
                          {"hw_rev", text_or_empty(a.hw_rev)},
                          {"board_id", text_or_empty(a.board_id)},
                          {"node_guid", text_or_empty(a.node_guid)},
                          {"sys_image_guid", text_or_empty(a.sys_image_guid)},
                          {"node_desc", node_desc}});
      st.info_generation = a.generation;
      st.info_fw_ver = std::move(fw_ver);
      st.info_node_desc = std::move(node_desc);
    }
    out.gauge_u64(st.info, "rdma_device_info",
                  "RDMA device attributes: driver, node type, firmware, HCA type, board, GUIDs, node description. "
                  "Always 1.",
                  1);
  }

  void collect_port(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev, DeviceState& dst,
                    const model::PortModel& port, PortState& st, MetricSink& out) {
    const LabelSet& base = st.base;
    out.gauge_u64(base, "rdma_port_info", "RDMA port: its link layer (InfiniBand, Ethernet or Unknown). Always 1.", 1,
                  "link_layer", model::link_layer_label(port.link_layer));
    for (const auto& nd : port.netdevs) {
      Labels l;
      l.reserve(base.labels().size() + 2);
      l = base.labels();
      l.emplace_back("netdev", nd.name);
      l.emplace_back("via", nd.via);
      out.info("rdma_port_netdev_info",
               "Network device behind an RDMA port; via tells how it was found (gid_attrs, device_net, parent). Always 1.",
               std::move(l));
    }

    // The device's directory, refreshed by collect_device: the port's stats look up from it.
    sysfs::KeptDir& attrs =
        kept_.at(st.dir_ref, port.path, &device_dir(dev, dst), port.identity ? &*port.identity : nullptr);
    auto a = sysfs::read_port_attributes(attrs);
    auto gauge_if = [&](const char* file, const char* name, const char* help, const auto& r, auto value_of) {
      if (r.ok()) out.gauge(base, name, help, static_cast<double>(value_of(r.value)));
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
      out.gauge(base, "rdma_port_link_width_lanes", "Link width in lanes, from the rate attribute.", a.rate.value.width);
    gauge_if("lid", "rdma_port_lid", "Local identifier of the port (0 on RoCE).", a.lid, same);
    gauge_if("sm_lid", "rdma_port_sm_lid", "LID of the subnet manager the port is managed by (0 on RoCE).", a.sm_lid, same);

    std::uint64_t mads = 0;
    const bool by_mad = collect_counters_mad(ctx, dev, port, a, base, out, mads);
    // A port read with MADs leaves counters/ and counters_ext/ alone (the sweep closes them).
    sysfs::KeptDir* counters = by_mad ? nullptr : &kept_.at(st.counters_ref, st.counters_path, &attrs);
    sysfs::KeptDir* legacy = by_mad ? nullptr : &kept_.at(st.legacy_ref, st.legacy_path, &attrs);
    if (!by_mad) {
      collect_counters(ctx, dev, port, st, *counters, out);
      collect_legacy(ctx, st, *legacy, out);
    }
    if (use_verbs_) collect_verbs(dev, port, base, out);
    if (const auto* e = port_events(dev.name, port.number)) emit_port_events(base, *e, out);

    // What this port cost the kernel in this scrape: on mlx5 each counters/ read is a firmware
    // command, so the count is the cost. The port's own attribute files and counters/ and
    // counters_ext/, not the device attributes nor the shared discovery.
    std::uint64_t opens = 0, preads = 0, counter_files = 0;
    for (sysfs::KeptDir* d : {&attrs, counters, legacy}) {
      if (!d) continue;
      auto [o, p] = d->take_counts();
      opens += o;
      preads += p;
      if (d != &attrs) counter_files += o + p;
    }
    const char* help = "Files the port collector read for the port in this scrape, by method: open (opened and read: "
                       "the first scrape, or a file reopened) and pread (re-read through a descriptor kept open).";
    out.gauge(base, "rdma_port_file_reads", help, static_cast<double>(opens), "method", "open");
    out.gauge(base, "rdma_port_file_reads", help, static_cast<double>(preads), "method", "pread");
    const char* pma_help = "Reads of the port's PMA counters in this scrape, by source: sysfs (counters/ and "
                           "counters_ext/ files, each a PMA MAD inside the driver) and mad (MADs the collector sent "
                           "through the port's umad device, retries included).";
    out.gauge_u64(base, "rdma_port_pma_reads", pma_help, counter_files, "source", "sysfs");
    out.gauge_u64(base, "rdma_port_pma_reads", pma_help, mads, "source", "mad");
  }

  void collect_counters(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev,
                        const model::PortModel& port, PortState& st, sysfs::KeptDir& kept, MetricSink& out) {
    const LabelSet& base = st.base;
    const std::string& dir = st.counters_path;
    // Every value is read before any is written: whether the port has PMA counters at all
    // depends on all of them.
    auto names = kept.names();
    auto& values = st.values;
    values.clear();
    if (names)
      for (std::size_t i = 0; i < names.value->size(); ++i) values.push_back(kept.read_u64_at(i));
    // Kernels before 4.20 create counters/ for a device without a PMA too (i40iw) and print
    // "N/A (no PMA)" in every file: like a missing directory, that is what the port is.
    bool all_not_available = names.ok() && !values.empty();
    for (const auto& v : values) all_not_available &= v.error == ReadError::kNotAvailable;
    const bool present = names.ok() && !all_not_available;
    out.gauge(base, "rdma_port_pma_counters_present", kPresentHelp, present ? 1.0 : 0.0);
    if (present || all_not_available || names.error == ReadError::kNotFound)
      ctx.errors.capability("pma_counters", dev.name + "/" + port.number_label, present,
                            all_not_available ? dir + " reads \"N/A (no PMA)\": the driver has no PMA"
                                              : dir + " does not exist: the driver has no PMA");
    if (!names) {
      report_unless_absent(ctx.errors, names.error, dir);
    } else if (!all_not_available) {
      if (st.defs_generation != kept.generation() || st.defs.size() != names.value->size()) {
        st.defs.clear();
        st.has_unicast = false;
        for (const auto& name : *names.value) {
          st.defs.push_back(find_counter(name));
          st.has_unicast |= name == "unicast_xmit_packets";
        }
        st.defs_generation = kept.generation();
      }
      const std::uint8_t data_width = data_counter_width(st.has_unicast, dev.driver);
      for (std::size_t i = 0; i < values.size(); ++i) {
        const CounterDef* def = st.defs[i];
        emit_counter(ctx, dir, (*names.value)[i], values[i], def, def && def->width == 0 ? data_width : 0, base, out);
      }
    }
  }

  void collect_legacy(const exporter::ScrapeContext& ctx, const PortState& st, sysfs::KeptDir& kept, MetricSink& out) {
    auto names = kept.names();
    if (!names) return report_unless_absent(ctx.errors, names.error, st.legacy_path);
    for (std::size_t i = 0; i < names.value->size(); ++i) {
      const std::string& name = (*names.value)[i];
      emit_counter(ctx, st.legacy_path, name, kept.read_u64_at(i), find_legacy_counter(name), 64, st.base, out);
    }
  }

  // The port's counters from its PMA agent with MADs, where the source setting allows and the port
  // can be asked (an ACTIVE InfiniBand port with a LID: PMA MADs are LID-routed), with the names,
  // values and saturation flags of its counters/ files. counters/ and counters_ext/ are then not
  // read. False when the port's counters are still to be read from sysfs.
  bool collect_counters_mad(const exporter::ScrapeContext& ctx, const model::DeviceModel& dev,
                            const model::PortModel& port, const sysfs::PortAttributes& a, const LabelSet& base,
                            MetricSink& out, std::uint64_t& mads) {
    constexpr std::uint64_t kActive = 4;
    if (source_ == CountersSource::kSysfs || port.link_layer != model::LinkLayer::kInfiniBand || !a.state.ok() ||
        a.state.value.id != kActive || !a.lid.ok() || a.lid.value == 0 || a.lid.value > 0xffff)
      return false;
    const int number = static_cast<int>(port.number);
    if (source_ == CountersSource::kAuto && mad_.backing_off(dev.name, number)) return false;
    const auto r = mad_.read(dev.name, number, static_cast<std::uint16_t>(a.lid.value), dev.path);
    mads = r.mads;
    const std::string id = dev.name + "/" + port.number_label;
    if (source_ == CountersSource::kAuto && r.no_device) {
      // Not this host's device (a fixture tree) or no umad access here: counters/ as without MADs.
    } else if (source_ == CountersSource::kAuto)
      ctx.errors.capability("pma_mad", id, r.readings.has_value(),
                            "PMA MADs to " + id + " failed (" + r.error +
                                "): its counters are read from counters/ (a PMA MAD inside the driver per file), "
                                "MADs tried again in 60 s");
    else if (!r.readings)
      ctx.errors.report("mad", id, "PMA MADs to " + id + " failed (" + r.error + "): its counters are not exported");
    if (!r.readings) return source_ == CountersSource::kMad;
    out.gauge(base, "rdma_port_pma_counters_present", kPresentHelp, 1.0);
    ctx.errors.capability("pma_counters", id, true, "");
    for (const CounterDef& def : pma_counter_defs()) {
      const auto v = mad::pma_value(*def.pma, *r.readings);
      if (!v) continue;
      emit_counter(ctx, "", std::string(def.file), Result<std::uint64_t>::success(v->raw), &def, v->width, base, out);
    }
    return true;
  }

  // dir: the counter's directory; its path is only built for an error report.
  static void emit_counter(const exporter::ScrapeContext& ctx, const std::string& dir, const std::string& name,
                           const Result<std::uint64_t>& value, const CounterDef* def,
                           std::uint8_t width_override, const LabelSet& base, MetricSink& out) {
    if (!value) {
      // One "N/A" file is a counter the driver cannot provide, not a failed read.
      if (value.error != ReadError::kNotAvailable) ctx.errors.report_read(value.error, dir + "/" + name);
      return;
    }
    const std::uint64_t v = value.value;
    if (!def) {
      // A counter this version does not know yet: exported under its kernel name.
      out.counter("rdma_port_pma_other_total", "PMA counter files not known to this exporter version, by file name.",
                  with(base.labels(), "counter", name), v);
      return;
    }
    if (def->scale == 1) out.counter(base, def->metric, def->help, v);
    else if (v <= UINT64_MAX / def->scale) out.counter(base, def->metric, def->help, v * def->scale);
    else out.add(base, def->metric, exporter::MetricType::kCounter, def->help, static_cast<double>(v) * def->scale);

    const std::uint8_t width = def->width ? def->width : width_override;
    if (width > 0 && width < 64)
      out.gauge(base, "rdma_port_pma_saturated",
                "1 when a PMA counter narrower than 64 bits sits at its maximum (it no longer counts until reset).", v >= max_for_width(width) ? 1.0 : 0.0, "counter", def->file);
  }

  void collect_verbs(const model::DeviceModel& dev, const model::PortModel& port, const LabelSet& base, MetricSink& out) {
    auto attrs = verbs_.query(dev.name, port.number);
    if (!attrs) return;  // no device access: these are simply absent
    if (attrs->active_mtu_bytes)
      out.gauge(base, "rdma_port_active_mtu_bytes", "Active path MTU of the port (ibv_query_port).", attrs->active_mtu_bytes);
    if (attrs->max_mtu_bytes)
      out.gauge(base, "rdma_port_max_mtu_bytes", "Largest MTU the port supports (ibv_query_port).", attrs->max_mtu_bytes);
    if (attrs->active_width_lanes)
      out.gauge(base, "rdma_port_active_width_lanes", "Active link width in lanes (ibv_query_port).", attrs->active_width_lanes);
    if (attrs->lane_speed_bits_per_second)
      out.gauge(base, "rdma_port_active_lane_speed_bits_per_second", "Active signalling rate per lane (ibv_query_port).",
                static_cast<double>(attrs->lane_speed_bits_per_second));
  }

  // The daemon's async event counts, once per scrape before the device threads read them; the
  // device-wide series are written here. A device verbs cannot open is state, logged once.
  void take_events(const exporter::ScrapeContext& ctx, MetricSink& out) {
    if (!events_) return;
    events_now_ = events_->snapshot();
    for (const auto& dev : ctx.host.devices) {
      auto it = events_now_.devices.find(dev.name);
      if (it != events_now_.devices.end()) emit_device_events(dev.name, it->second, out);
      const bool unopenable = std::find(events_now_.unopenable.begin(), events_now_.unopenable.end(), dev.name) != events_now_.unopenable.end();
      if (it != events_now_.devices.end() || unopenable)
        ctx.errors.capability("async_events", dev.name, !unopenable,
                              "verbs cannot open " + dev.name + " (no access to /dev/infiniband?): its async events and verbs attributes are not read");
    }
  }
  const verbs::PortEventState* port_events(const std::string& device, std::uint32_t port) const {
    auto d = events_now_.devices.find(device);
    if (d == events_now_.devices.end()) return nullptr;
    auto p = d->second.ports.find(port);
    return p == d->second.ports.end() ? nullptr : &p->second;
  }

  static constexpr const char* kPresentHelp =
      "1 when the port has PMA counters in counters/ or answers PMA MADs (rxe, irdma, efa and other drivers have none; "
      "old kernels print N/A in every file instead).";
  static constexpr unsigned kMaxThreads = 4;  // devices read at once
  // Starting and joining three threads costs about 100 us on a loaded host: below 2 ms of reads
  // one thread is faster (bench/port/bench_port.py: 1.3 x the raw floor against 2.0 x with four).
  static constexpr std::uint64_t kThreadsWorthNs = 2'000'000;
  std::atomic<std::uint64_t> last_work_ns_{UINT64_MAX};  // the first scrape: assume slow reads
  bool use_verbs_;
  CountersSource source_;
  MadCounters mad_;
  // The attribute and counter files stay open between scrapes (sources/sysfs/reader.h says when
  // they are reopened): 9 descriptors per device, 6 + 1 + one per counters/ file (22 on mlx5) per port.
  sysfs::KeptDirs kept_;
  std::unordered_map<std::string, PortState> ports_;  // by port path; ports gone are dropped
  std::unordered_map<std::string, DeviceState> devices_;  // by device path; devices gone are dropped
  verbs::PortAttributeReader verbs_;
  std::shared_ptr<verbs::DeviceEvents> events_;  // null: not verbs (a fake tree), or a test without one
  verbs::EventSnapshot events_now_;             // this scrape's, read by the device threads
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "port",
    .help = "Per-port PMA counters, port and device attributes, netdevs (sysfs) and MTU/width/speed (verbs).",
    .enabled_by_default = true,
    .settings = {{"verbs", exporter::OptionType::kString, "auto",
                  "Query ibv_query_port for MTU/width/speed: auto (only when --path.sysfs is /sys), true or false."},
                 {"counters-source", exporter::OptionType::kString, "auto",
                  "Where the PMA counters of ACTIVE InfiniBand ports come from: auto (MADs through the port's umad "
                  "device where it is the tree's device, counters/ where there is none or its MADs fail), sysfs "
                  "(counters/ only) or mad (MADs only: a failure is an error and leaves the port's counters out). "
                  "Other ports always read counters/."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g)
        -> std::unique_ptr<exporter::Collector> {
      const std::string mode = s.choice("verbs", {"auto", "true", "false"});
      const std::string source = s.choice("counters-source", {"auto", "sysfs", "mad"});
      const CountersSource counters = source == "mad"     ? CountersSource::kMad
                                      : source == "sysfs" ? CountersSource::kSysfs
                                                          : CountersSource::kAuto;
      // verbs sees the real host; with a fake sysfs tree it would describe other devices.
      return std::make_unique<PortCollector>(mode == "true" || (mode == "auto" && g.sysfs_root == "/sys"), counters,
                                             g.device_events);
    },
});

}  // namespace rdma::collectors::port
