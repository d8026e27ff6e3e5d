// Collector "netdev": the Ethernet side of RoCE ports. For every port whose link layer is
// Ethernet, on the netdevs the host model resolved: PFC/pause statistics (SIOCETHTOOL with
// per-driver maps, ethtool-netlink standard pause statistics), the IEEE DCB configuration
// (dcbnl), the ECN/DCQCN configuration (sysfs, under --path.sysfs), an allow-list of raw ethtool
// statistics and a per-port consistency signal for the RoCE priority.
//
// ethtool and dcbnl act on the netdevs of the exporter's network namespace, by name. A netdev is
// read there only when it is the one the sysfs tree describes (same ifindex): a fake tree (the
// demo, fixtures) or another namespace's /sys names netdevs that are not this kernel's, even when
// one has the same name (eth0), so only the tree's parts are read, as state logged once. A tree
// without the netdev's ifindex names it only: absent here, it is counted and logged once per
// netdev (reason netdev_missing). A source a netdev does not support (EOPNOTSUPP: veth has no
// pause or DCB) and a driver without an ECN sysfs tree (every inbox driver: only MLNX_OFED has
// class/net/<if>/ecn) are the host's state, not errors: recorded as capabilities
// (rdma_exporter_collector_capability), logged once, and not asked again. A bond's pause and PFC
// are its slaves': the slaves (which the host model lists after it) are read, the bond itself is
// not.
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "collectors/netdev/link_metrics.h"
#include "collectors/netdev/netdev_metrics.h"
#include "exporter/collector.h"
#include "sources/dcb/dcbnl.h"
#include "sources/dcb/ecn_sysfs.h"
#include "sources/ethtool/ethtool_ioctl.h"
#include "sources/ethtool/ethtool_netlink.h"
#include "sources/ethtool/netdev_here.h"
#include "sources/ethtool/stat_map.h"

namespace rdma::collectors::netdev {
namespace {


constexpr std::size_t kMaxExtraStats = 64;

struct NetdevState {
  unsigned ifindex = 0;
  bool missing_reported = false;
  bool stats_unsupported = false;
  bool pause_unsupported = false;
  bool dcb_unsupported = false;
  bool linkstate_unsupported = false;
  bool fec_unsupported = false;
  bool link_down_from_netlink = false;  // this scrape: ethtool netlink gave the link down count
  std::string driver;
  std::size_t count = 0;  // size of the cached string table
  bool have_table = false;
  std::vector<ethtool::MappedStat> mapped;
  std::vector<std::pair<std::size_t, std::string>> extra;
};

class NetdevCollector final : public exporter::Collector {
 public:
  NetdevCollector(int roce_priority, std::vector<std::string> extra_stats)
      : roce_priority_(roce_priority), extra_stats_(std::move(extra_stats)) {}

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    for (const auto& dev : ctx.host.devices) {
      for (const auto& port : dev.ports) {
        if (port.link_layer != model::LinkLayer::kEthernet) continue;
        const Labels port_base{{"device", dev.name}, {"port", port.number_label}};
        Tri pfc = Tri::kUnknown, ecn = Tri::kAbsent;  // absent: the identity of fold()
        for (const auto& nd : port.netdevs) {
          if (nd.bond) continue;  // its slaves follow it, each read on its own
          Labels base = port_base;
          base.emplace_back("netdev", nd.name);
          auto [p, e] = collect_netdev(ctx, nd.name, base, out);
          pfc = fold(pfc, p);
          ecn = fold(ecn, e);
        }
        emit_consistency(port_base, roce_priority_, pfc, ecn, out);
      }
    }
    log_not_kernels(ctx.host.sysfs_root);
  }

 private:
  // Reports a source's failure. EOPNOTSUPP is what the netdev is: a capability it lacks, after
  // which the source is skipped.
  static void report(const exporter::ScrapeContext& ctx, ReadError e, const std::string& what, const std::string& netdev,
                     bool* unsupported_flag) {
    if (e == ReadError::kNotSupported) {
      *unsupported_flag = true;
      ctx.errors.capability(what, netdev, false, "netdev " + netdev + " does not support " + what + " (EOPNOTSUPP)");
      return;
    }
    ctx.errors.report(reason_label(e), what + " " + netdev, what + " failed on netdev " + netdev);
  }

  std::pair<Tri, Tri> collect_netdev(const exporter::ScrapeContext& ctx, const std::string& name, const Labels& base,
                                     MetricSink& out) {
    // ECN/DCQCN: sysfs, valid even when the netdev is not in this namespace.
    auto ecn_cfg = dcb::read_ecn_config(ctx.host.sysfs_root, name);
    for (const auto& [path, err] : ecn_cfg.issues) ctx.errors.report_read(err, path);
    emit_ecn(base, ecn_cfg, out);
    ctx.errors.capability("ecn_sysfs", name, ecn_cfg.present(),
                          "netdev " + name + " has no class/net/" + name +
                              "/ecn (only MLNX_OFED's mlx5 exposes the ECN configuration there); ECN not checked");
    const int ecn_on = ecn_cfg.enabled(roce_priority_);
    const Tri ecn = !ecn_cfg.present() ? Tri::kAbsent : ecn_on < 0 ? Tri::kUnknown : (ecn_on ? Tri::kYes : Tri::kNo);
    // Carrier counters: sysfs too.
    emit_carrier(base, read_carrier_counters(ctx.host.sysfs_root, name,
                                             [&](const std::string& path, ReadError e) { ctx.errors.report_read(e, path); }),
                 out);

    NetdevState& st = state_[name];
    const ethtool::NetdevHere here = ethtool::netdev_here(ctx.host.sysfs_root, name);
    out.gauge("rdma_netdev_present",
              "1 when the port's netdev is in the exporter's network namespace, as the sysfs tree describes it (ethtool and DCB need it).",
              base, here.here() ? 1 : 0);
    if (here.state == ethtool::NetdevHere::State::kElsewhere) {
      if (not_kernels_.insert(name).second) new_not_kernels_.push_back(name);
      st = NetdevState{};
      return {Tri::kUnknown, ecn};
    }
    if (!here.here()) {
      if (!st.missing_reported)
        ctx.errors.report("netdev_missing", name,
                          "netdev " + name + " is not in this network namespace (fake --path.sysfs or another netns); ethtool and DCB skipped");
      st = NetdevState{};
      st.missing_reported = true;
      return {Tri::kUnknown, ecn};
    }
    if (st.ifindex != here.ifindex) st = NetdevState{.ifindex = here.ifindex};

    if (st.driver.empty()) {
      auto drv = ioctl_.driver(name);
      if (drv) st.driver = drv.value;
      else report(ctx, drv.error, "ethtool_drvinfo", name, &st.stats_unsupported);
    }
    if (!st.driver.empty()) out.info("rdma_netdev_info", "Netdev behind an Ethernet RDMA port and its driver (ethtool). Always 1.",
                                     [&] { Labels l = base; l.emplace_back("driver", st.driver); return l; }());

    bool link_pause_done = false;
    if (!st.pause_unsupported) {
      auto pause = pause_.read(name);
      if (pause) link_pause_done = emit_link_pause(base, pause.value, out);
      else report(ctx, pause.error, "pause_stats", name, &st.pause_unsupported);
    }
    collect_link_health(ctx, name, st, base, out);
    if (!st.stats_unsupported) collect_stats(ctx, name, st, base, link_pause_done, out);

    Tri pfc = Tri::kUnknown;
    if (!st.dcb_unsupported) {
      auto cfg = dcb_.read(name);
      if (cfg) {
        emit_dcb(base, cfg.value, out);
        if (cfg.value.pfc) pfc = cfg.value.pfc->enabled(roce_priority_) ? Tri::kYes : Tri::kNo;
      } else {
        report(ctx, cfg.error, "dcbnl", name, &st.dcb_unsupported);
      }
    }
    return {pfc, ecn};
  }

  // ethtool netlink link state (why a link is down) and FEC statistics. veth, rxe's netdevs and
  // most drivers without a PHY answer EOPNOTSUPP for FEC: a capability, asked no more.
  void collect_link_health(const exporter::ScrapeContext& ctx, const std::string& name, NetdevState& st, const Labels& base,
                           MetricSink& out) {
    st.link_down_from_netlink = false;
    if (!st.linkstate_unsupported) {
      auto ls = link_.linkstate(name);
      if (ls) {
        st.link_down_from_netlink = emit_linkstate(base, ls.value, out);
        ctx.errors.capability("ethtool_linkstate", name, true, "");
      } else {
        report(ctx, ls.error, "ethtool_linkstate", name, &st.linkstate_unsupported);
      }
    }
    if (!st.fec_unsupported) {
      auto fec = link_.fec(name);
      if (fec) {
        emit_fec(base, fec.value, out);
        ctx.errors.capability("ethtool_fec", name, true, "");
      } else {
        report(ctx, fec.error, "ethtool_fec", name, &st.fec_unsupported);
      }
    }
  }

  // One line for the netdevs first found not to be this kernel's (normally all at the first scrape).
  void log_not_kernels(const std::string& sysfs_root) {
    if (new_not_kernels_.empty()) return;
    spdlog::info("netdev: {} in {} {} not this kernel's (a fake --path.sysfs or another network namespace's /sys): "
                 "only the tree's files are read, no ethtool or DCB",
                 fmt::join(new_not_kernels_, ", "), sysfs_root, new_not_kernels_.size() == 1 ? "is" : "are");
    new_not_kernels_.clear();
  }

  void collect_stats(const exporter::ScrapeContext& ctx, const std::string& name, NetdevState& st, const Labels& base,
                     bool link_pause_done, MetricSink& out) {
    auto count = ioctl_.stats_count(name);
    if (!count) return report(ctx, count.error, "ethtool_sset_info", name, &st.stats_unsupported);
    if (!st.have_table || st.count != count.value) {
      auto names = ioctl_.stat_names(name, count.value);
      if (!names) return report(ctx, names.error, "ethtool_gstrings", name, &st.stats_unsupported);
      st.count = count.value;
      st.have_table = true;
      st.mapped = ethtool::map_stats(st.driver, names.value);
      st.extra = select_extra(names.value, extra_stats_);
    }
    if (st.mapped.empty() && st.extra.empty()) return;  // nothing this driver maps: skip GSTATS
    auto values = ioctl_.stat_values(name, st.count);
    if (!values) {
      st.have_table = false;  // the table changed size meanwhile: read it again next scrape
      return report(ctx, values.error, "ethtool_gstats", name, &st.stats_unsupported);
    }
    emit_mapped(base, st.mapped, values.value, link_pause_done, out, st.link_down_from_netlink);
    emit_extra(base, st.extra, values.value, out);
  }

  int roce_priority_;
  std::vector<std::string> extra_stats_;
  ethtool::IoctlClient ioctl_;
  // A kernel answer is immediate: never hold the scrape on a lost one.
  netlink::GenlClient ethtool_{ethtool::kGenlFamily, std::chrono::seconds(2)};  // pause_'s and link_'s
  ethtool::PauseReader pause_{ethtool_};
  ethtool::LinkHealthReader link_{ethtool_};
  dcb::Reader dcb_{std::chrono::seconds(2)};
  std::map<std::string, NetdevState> state_;
  std::set<std::string> not_kernels_;  // logged once each
  std::vector<std::string> new_not_kernels_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "netdev",
    .help = "RoCE netdevs: PFC/pause statistics (ethtool), DCB configuration (dcbnl), ECN/DCQCN (sysfs), RoCE priority consistency.",
    .enabled_by_default = true,
    .settings = {{"roce-priority", exporter::OptionType::kInt, "3",
                  "Priority (0-7) that carries RoCE traffic: checked for PFC and ECN by rdma_netdev_roce_priority_consistent."},
                 {"extra-stats", exporter::OptionType::kStringList, "",
                  "ethtool statistic names exported as they are in rdma_netdev_ethtool_stat (none by default; at most 64)."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext&)
        -> std::unique_ptr<exporter::Collector> {
      const auto prio = s.integer("roce-priority", 0, 7);
      std::vector<std::string> extra;
      for (auto& n : s.list("extra-stats")) {
        if (n.empty()) continue;
        if (n.size() >= ethtool::kStringLength)
          throw s.error("extra-stats", "'" + n + "' is longer than an ethtool statistic name (31 characters)");
        extra.push_back(n);
      }
      if (extra.size() > kMaxExtraStats)
        throw s.error("extra-stats", "at most " + std::to_string(kMaxExtraStats) + " names");
      return std::make_unique<NetdevCollector>(static_cast<int>(prio), std::move(extra));
    },
});

}  // namespace rdma::collectors::netdev
