// Collector "nic_health": the hardware under an RDMA port. Per Ethernet port's netdev, the
// transceiver's module EEPROM over ethtool netlink (identity, monitors, its own thresholds and
// flags: sources/ethtool/module_eeprom.h); per RDMA device, the temperatures its driver registers
// in hwmon under the PCI function (mlx5: ASIC and modules; the only module temperature an
// InfiniBand port without a netdev has); per PCI function, devlink health reporters and devlink
// dev info (firmware running and stored); and, off by default, kernel-log fault counts
// (kmsg_reader.h).
//
// What a host or driver lacks is state, never a recurring error: a netdev without module EEPROM
// (veth, e1000e: EOPNOTSUPP), an empty cage (EIO/ENODEV: rdma_transceiver_present 0), a device
// without a PCI function or devlink instance (rxe, siw), a kernel without the devlink family,
// and a kernel log the exporter may not read (no CAP_SYSLOG) are capabilities
// (rdma_exporter_collector_capability), logged once. As in the netdev collector, ethtool is asked
// only about a netdev that is this namespace's one (same ifindex as the sysfs tree says).
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "collectors/nic_health/kmsg_reader.h"
#include "collectors/nic_health/nic_health_metrics.h"
#include "exporter/collector.h"
#include "sources/devlink/devlink.h"
#include "sources/ethtool/ethtool_ioctl.h"
#include "sources/ethtool/ethtool_netlink.h"
#include "sources/ethtool/module_eeprom.h"
#include "sources/ethtool/netdev_here.h"
#include "sources/pci/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::nic_health {
namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  bool module_eeprom = true;
  bool hwmon = true;
  bool devlink = true;
  bool kmsg = false;
  std::string kmsg_path = "/dev/kmsg";
  std::chrono::seconds static_refresh{300};
};

struct ModuleState {
  unsigned ifindex = 0;
  bool unsupported = false;
  std::optional<ethtool::ModuleMemory> cached;
  Clock::time_point cached_at{};
};

class NicHealthCollector final : public exporter::Collector {
 public:
  explicit NicHealthCollector(Settings s) : s_(std::move(s)) {
    if (s_.kmsg) kmsg_ = std::make_unique<KmsgReader>(s_.kmsg_path);
  }

  void start() override {
    if (kmsg_) kmsg_->start();
  }
  void stop() override {
    if (kmsg_) kmsg_->stop();
  }

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    std::map<std::string, std::string> pci_to_device;  // PCI function -> RDMA device
    DeviceNames names;
    std::set<std::string> seen_netdevs;
    for (const auto& dev : ctx.host.devices) {
      auto pci = sysfs::read_link_basename(dev.path + "/device");
      const bool has_pci = pci && pci::is_bdf(pci.value);  // "0000:08:00.0", a PCI function
      if (has_pci) {
        pci_to_device.try_emplace(pci.value, dev.name);
        names.try_emplace(pci.value, dev.name);
      }
      names.try_emplace(dev.name, dev.name);
      if (s_.hwmon && has_pci) collect_hwmon(ctx, dev.name, dev.path + "/device/hwmon", out);
      for (const auto& port : dev.ports) {
        for (const auto& nd : port.netdevs) {
          names.try_emplace(nd.name, dev.name);
          if (!s_.module_eeprom || nd.bond || port.link_layer != model::LinkLayer::kEthernet) continue;
          seen_netdevs.insert(nd.name);
          collect_module(ctx, {{"device", dev.name}, {"port", port.number_label}, {"netdev", nd.name}}, nd.name, out);
        }
      }
    }
    std::erase_if(modules_, [&](const auto& e) { return !seen_netdevs.count(e.first); });
    if (s_.devlink && !ctx.host.devices.empty()) collect_devlink(ctx, pci_to_device, out);
    if (kmsg_) {
      kmsg_->set_device_names(std::move(names));
      emit_kmsg(ctx, out);
    }
  }

 private:
  void collect_module(const exporter::ScrapeContext& ctx, const Labels& base, const std::string& name, MetricSink& out) {
    const ethtool::NetdevHere here = ethtool::netdev_here(ctx.host.sysfs_root, name);
    if (!here.here()) {
      // Not this namespace's netdev (a fake --path.sysfs, another namespace's /sys): the
      // netdev collector says so (rdma_netdev_present 0); nothing to read here.
      modules_.erase(name);
      return;
    }
    ModuleState& st = modules_[name];
    if (st.ifindex != here.ifindex) st = ModuleState{.ifindex = here.ifindex};
    if (st.unsupported) return;
    const bool reuse = st.cached && Clock::now() - st.cached_at < s_.static_refresh;
    auto mem = eeprom_.read_module(name, reuse ? &*st.cached : nullptr);
    if (!mem) {
      switch (mem.error) {
        case ReadError::kNotSupported:
          st.unsupported = true;
          ctx.errors.capability("module_eeprom", name, false,
                                "netdev " + name + " has no module EEPROM (EOPNOTSUPP: no transceiver cage, or a driver without "
                                "get_module_eeprom); transceiver not read");
          return;
        case ReadError::kAccess:
          // ETHTOOL_MSG_MODULE_EEPROM_GET is GENL_UNS_ADMIN_PERM (module pages are selected by a
          // write): without CAP_NET_ADMIN (the shipped systemd unit) the kernel answers EPERM for
          // every netdev. The process's capabilities do not change: not asked again.
          st.unsupported = true;
          ctx.errors.capability("module_eeprom", name, false,
                                "module EEPROM of netdev " + name + " not readable: EPERM (the kernel requires CAP_NET_ADMIN "
                                "for ETHTOOL_MSG_MODULE_EEPROM_GET); transceiver not read");
          return;
        case ReadError::kIo:
        case ReadError::kNoDevice:
        case ReadError::kNotFound:
          // An empty cage (mlx5: EIO; others ENODEV): the module's state, not the exporter's error.
          ctx.errors.capability("module_eeprom", name, true, "");
          st.cached.reset();
          out.gauge("rdma_transceiver_present", "1 when a transceiver module answered on the netdev's cage, 0 when the cage "
                    "answers that there is none (EIO/ENODEV).", base, 0);
          return;
        default:
          ctx.errors.report(reason_label(mem.error), "module_eeprom " + name, "module EEPROM read failed on netdev " + name);
          return;
      }
    }
    ctx.errors.capability("module_eeprom", name, true, "");
    out.gauge("rdma_transceiver_present",
              "1 when a transceiver module answered on the netdev's cage, 0 when the cage answers that there is none (EIO/ENODEV).",
              base, 1);
    if (!reuse) st.cached_at = Clock::now();
    st.cached = mem.value;
    auto info = ethtool::decode_module(mem.value);
    if (info.ok() || info.error == ReadError::kNotSupported) {
      // A module of a spec not decoded here (not SFF-8636, CMIS or SFF-8472) still has its identifier.
      emit_transceiver(base, info.value, out);
      return;
    }
    ctx.errors.report(reason_label(info.error), "module_eeprom_decode " + name, "module EEPROM of netdev " + name + " is malformed");
  }

  void collect_hwmon(const exporter::ScrapeContext& ctx, const std::string& device, const std::string& dir, MetricSink& out) {
    auto entries = sysfs::list_names(dir);
    if (!entries) return;  // no hwmon device registered (most drivers): nothing to report
    for (const auto& h : entries.value) {
      if (h.rfind("hwmon", 0) != 0) continue;
      const std::string hdir = dir + "/" + h;
      auto files = sysfs::list_names(hdir);
      if (!files) {
        ctx.errors.report_read(files.error, hdir);
        continue;
      }
      std::map<std::string, std::string> contents;
      for (const auto& f : files.value) {
        if (f.rfind("temp", 0) != 0 || contents.size() >= 256) continue;
        if (f.find("_reset_history") != std::string::npos) continue;  // write-only
        auto v = sysfs::read_file(hdir + "/" + f);
        // A sensor the firmware cannot read now answers EIO/ENODATA: its row is left out.
        if (v) contents.emplace(f, std::move(v.value));
      }
      emit_hwmon({{"device", device}}, parse_hwmon(contents), out);
    }
  }

  void collect_devlink(const exporter::ScrapeContext& ctx, const std::map<std::string, std::string>& pci_to_device,
                       MetricSink& out) {
    // A device without a PCI function (rxe, siw) has no devlink instance; a kernel without the
    // family (CONFIG_NET_DEVLINK=n) answers ENOENT at the family lookup.
    auto reporters = devlink_.health_reporters();
    if (!reporters) {
      if (reporters.error == ReadError::kNotSupported || reporters.error == ReadError::kAccess) {
        ctx.errors.capability("devlink", "host", false,
                              std::string("devlink health reporters not readable (") + std::string(reason_label(reporters.error)) +
                                  "): no devlink family in this kernel, or not permitted");
        return;
      }
      ctx.errors.report(reason_label(reporters.error), "devlink_health", "devlink health reporter dump failed");
      return;
    }
    ctx.errors.capability("devlink", "host", true, "");
    for (const auto& [pci, device] : pci_to_device) {
      bool any = false;
      for (const auto& r : reporters.value)
        if (r.handle.bus == "pci" && r.handle.device == pci) any = true;
      ctx.errors.capability("devlink_instance", device, any,
                            "RDMA device " + device + " (" + pci + ") has no devlink health reporters");
    }
    const Labels none;
    for (const auto& r : reporters.value) {
      if (r.handle.bus != "pci") continue;
      auto it = pci_to_device.find(r.handle.device);
      if (it == pci_to_device.end()) continue;  // not an RDMA device's function
      emit_health_reporter({{"device", it->second}, {"devlink", r.handle.label()}}, r, out);
    }
    if (!infos_ || Clock::now() - infos_at_ >= s_.static_refresh) {
      auto infos = devlink_.infos();
      if (infos) {
        infos_ = std::move(infos.value);
        infos_at_ = Clock::now();
      } else if (infos.error != ReadError::kNotSupported && infos.error != ReadError::kAccess) {
        ctx.errors.report(reason_label(infos.error), "devlink_info", "devlink dev info dump failed");
      }
    }
    if (infos_)
      for (const auto& info : *infos_) {
        if (info.handle.bus != "pci") continue;
        auto it = pci_to_device.find(info.handle.device);
        if (it == pci_to_device.end()) continue;
        emit_devlink_info({{"device", it->second}, {"devlink", info.handle.label()}}, info, out);
      }
  }

  void emit_kmsg(const exporter::ScrapeContext& ctx, MetricSink& out) {
    const auto snap = kmsg_->snapshot();
    if (!snap.started) return;  // a collector used without start() (tests of other parts)
    ctx.errors.capability("kmsg", s_.kmsg_path, snap.open,
                          s_.kmsg_path + " cannot be read (" + std::string(std::strerror(snap.open_errno)) +
                              "): kernel-log fault counts need CAP_SYSLOG (kernel.dmesg_restrict)");
    if (!snap.open) return;
    out.counter("rdma_kmsg_records_total", "Kernel log records the reader has seen since it started.", {}, snap.records);
    static constexpr const char* kFaultsHelp =
        "Kernel driver lines (the kernel's own, with the driver's device prefix) matching a driver/firmware fault "
        "pattern (fault), by the RDMA device of the line's PCI address (device, \"\" when none).";
    // Every row of the table with no device, so that a fault's first occurrence is an increase.
    std::set<std::string_view> faults;  // a fault may have several rows (two watchdog formats)
    for (const auto& p : kKmsgPatterns)
      if (faults.insert(p.fault).second && !snap.counts.count({p.fault, ""}))
        out.counter("rdma_kmsg_faults_total", kFaultsHelp, {{"fault", p.fault}, {"device", ""}}, 0);
    for (const auto& [key, n] : snap.counts)
      out.counter("rdma_kmsg_faults_total", kFaultsHelp, {{"fault", key.first}, {"device", key.second}}, n);
  }

  Settings s_;
  netlink::GenlClient ethtool_{ethtool::kGenlFamily, std::chrono::seconds(2)};
  ethtool::ModuleEepromReader eeprom_{ethtool_};
  devlink::Client devlink_{std::chrono::seconds(2)};
  std::map<std::string, ModuleState> modules_;
  std::optional<std::vector<devlink::DeviceInfo>> infos_;
  Clock::time_point infos_at_{};
  std::unique_ptr<KmsgReader> kmsg_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "nic_health",
    .help = "Transceivers (module EEPROM: SFF-8636, CMIS), NIC temperatures (hwmon), devlink health reporters and firmware "
            "versions, optional kernel-log fault counts.",
    .enabled_by_default = true,
    .settings = {{"module-eeprom", exporter::OptionType::kBool, "true",
                  "Read the transceiver module EEPROM of Ethernet ports' netdevs (ethtool netlink)."},
                 {"hwmon", exporter::OptionType::kBool, "true", "Read the hwmon temperatures under RDMA devices' PCI functions."},
                 {"devlink", exporter::OptionType::kBool, "true", "Read devlink health reporters and dev info."},
                 {"static-refresh", exporter::OptionType::kDuration, "5m",
                  "How long the static module pages (identity, thresholds) and devlink dev info are reused before read again."},
                 {"kmsg", exporter::OptionType::kBool, "false",
                  "Count driver/firmware faults in the kernel log (needs CAP_SYSLOG; off by default)."},
                 {"kmsg-path", exporter::OptionType::kString, "/dev/kmsg", "The kernel log device."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext&)
        -> std::unique_ptr<exporter::Collector> {
      Settings st;
      st.module_eeprom = s.boolean("module-eeprom");
      st.hwmon = s.boolean("hwmon");
      st.devlink = s.boolean("devlink");
      st.kmsg = s.boolean("kmsg");
      st.kmsg_path = s.string("kmsg-path");
      if (st.kmsg_path.empty()) throw s.error("kmsg-path", "must not be empty");
      st.static_refresh = std::chrono::duration_cast<std::chrono::seconds>(s.positive_duration("static-refresh"));
      return std::make_unique<NicHealthCollector>(std::move(st));
    },
});

}  // namespace rdma::collectors::nic_health
