// ECN/DCQCN files in a fixture tree, the consistency signal, and the whole collector (created
// through the registry like the daemon does) on a host model whose netdevs are not in this
// network namespace: the sysfs parts still work, the absent netdev is counted once.
#include <net/if.h>

#include <catch2/catch.hpp>

#include "collectors/netdev/netdev_metrics.h"
#include "exporter/collector.h"
#include "exporter/options.h"
#include "sources/dcb/ecn_sysfs.h"
#include "tests/netdev/helpers.h"

using namespace rdma;
using namespace ndtest;  // find, with, kBase, Labels, MetricSink
using collectors::netdev::Tri;

namespace {

void write_ecn(const ndtest::TempTree& t, const std::string& netdev, const std::string& role, unsigned enabled_mask) {
  for (int p = 0; p < 8; ++p)
    t.write("class/net/" + netdev + "/ecn/" + role + "/enable/" + std::to_string(p), ((enabled_mask >> p) & 1) ? "1\n" : "0\n");
}

std::unique_ptr<exporter::Collector> make_collector(const std::vector<std::pair<std::string, std::string>>& flags = {}) {
  const exporter::CollectorDescriptor* desc = nullptr;
  for (const auto* d : exporter::registered_collectors())
    if (d->name == "netdev") desc = d;
  REQUIRE(desc);
  exporter::Options options;
  for (const auto& s : desc->settings)
    options.declare({"collector.netdev." + s.key, s.type, s.default_value, s.help, ""});
  std::vector<std::string> args{"test"};
  for (const auto& [k, v] : flags) args.push_back("--collector.netdev." + k + "=" + v);
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  options.resolve(options.parse_command_line(static_cast<int>(argv.size()), argv.data()));
  exporter::CollectorSettings settings(options, "netdev");
  return desc->create(settings, exporter::GlobalContext{"/sys", "/proc"});
}

model::HostModel host_with(const ndtest::TempTree& t, std::vector<std::pair<std::string, model::LinkLayer>> ports,
                           const std::string& netdev) {
  model::HostModel h;
  h.sysfs_root = t.root();
  for (auto& [dev, ll] : ports) {
    model::DeviceModel d;
    d.name = dev;
    d.driver = "mlx5";
    model::PortModel p;
    p.number = 1;
    p.number_label = "1";
    p.link_layer = ll;
    p.netdevs.push_back({netdev, "device_net"});
    d.ports.push_back(p);
    h.devices.push_back(d);
  }
  return h;
}

// The last of `n` scrapes (causes are counted once: n > 1 shows that).
MetricSink scrape(exporter::Collector& c, const model::HostModel& host, exporter::ErrorReporter& errors, int n = 1) {
  MetricSink out;
  for (int i = 0; i < n; ++i) {
    out = MetricSink{};
    c.collect(exporter::ScrapeContext{host, errors}, out);
  }
  return out;
}

}  // namespace

TEST_CASE("ECN files: enable per priority and role, DCQCN parameters", "[fixtures]") {
  ndtest::TempTree t;
  write_ecn(t, "ens1f0np0", "roce_np", 0x08);
  write_ecn(t, "ens1f0np0", "roce_rp", 0x28);
  t.write("class/net/ens1f0np0/ecn/roce_np/cnp_dscp", "48\n");
  t.write("class/net/ens1f0np0/ecn/roce_rp/rpg_min_rate", "1\n");
  t.write("class/net/ens1f0np0/ecn/roce_rp/rpg_max_rate", "0\n");
  t.write("class/net/ens1f0np0/ecn/roce_rp/broken", "abc\n");
  auto cfg = dcb::read_ecn_config(t.root(), "ens1f0np0");
  CHECK(cfg.present());
  CHECK(cfg.enabled(3) == 1);
  CHECK(cfg.enabled(5) == 0);  // rp on, np off
  CHECK(cfg.enabled(0) == 0);
  REQUIRE(cfg.issues.size() == 1);
  CHECK(cfg.issues[0].second == ReadError::kMalformed);

  const Labels base{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "ens1f0np0"}};
  MetricSink out;
  collectors::netdev::emit_ecn(base, cfg, out);
  CHECK(ndtest::count(out, "rdma_netdev_ecn_enabled") == 16);
  CHECK(find(out, "rdma_netdev_ecn_enabled", {{"role", "np"}, {"priority", "3"}})->number() == 1);
  CHECK(find(out, "rdma_netdev_ecn_enabled", {{"role", "np"}, {"priority", "5"}})->number() == 0);
  CHECK(find(out, "rdma_netdev_ecn_enabled", {{"role", "rp"}, {"priority", "5"}})->number() == 1);
  CHECK(find(out, "rdma_netdev_dcqcn_parameter", {{"role", "np"}, {"parameter", "cnp_dscp"}})->u64() == 48);
  CHECK(find(out, "rdma_netdev_dcqcn_parameter", {{"role", "rp"}, {"parameter", "rpg_max_rate"}})->u64() == 0);
  CHECK(ndtest::count(out, "rdma_netdev_dcqcn_parameter") == 3);

  auto none = dcb::read_ecn_config(t.root(), "eth9");
  CHECK_FALSE(none.present());
  CHECK(none.enabled(3) == -1);
  CHECK(none.issues.empty());
}

TEST_CASE("consistency: reason order and folding over a port's netdevs", "[unit]") {
  using collectors::netdev::emit_consistency;
  using collectors::netdev::fold;
  const Labels port{{"device", "mlx5_0"}, {"port", "1"}};
  MetricSink out;
  CHECK(emit_consistency(port, 3, Tri::kYes, Tri::kYes, out) == "ok");
  CHECK(find(out, "rdma_netdev_roce_priority_consistent", {{"priority", "3"}, {"reason", "ok"}})->number() == 1);
  MetricSink o2;
  CHECK(emit_consistency(port, 3, Tri::kNo, Tri::kNo, o2) == "pfc_disabled");
  CHECK(find(o2, "rdma_netdev_roce_priority_consistent")->number() == 0);
  MetricSink o3;
  CHECK(emit_consistency(port, 3, Tri::kYes, Tri::kNo, o3) == "ecn_disabled");
  CHECK(emit_consistency(port, 4, Tri::kUnknown, Tri::kYes, o3) == "pfc_unknown");
  CHECK(emit_consistency(port, 5, Tri::kYes, Tri::kUnknown, o3) == "ecn_unknown");
  // No ECN configuration to read at all (inbox drivers): PFC alone decides, nothing is off.
  MetricSink o4;
  CHECK(emit_consistency(port, 3, Tri::kYes, Tri::kAbsent, o4) == "ecn_not_exposed");
  CHECK(find(o4, "rdma_netdev_roce_priority_consistent", {{"reason", "ecn_not_exposed"}})->number() == 1);
  CHECK(emit_consistency(port, 4, Tri::kNo, Tri::kAbsent, o4) == "pfc_disabled");
  CHECK(emit_consistency(port, 5, Tri::kUnknown, Tri::kAbsent, o4) == "pfc_unknown");
  CHECK(fold(Tri::kAbsent, Tri::kUnknown) == Tri::kUnknown);
  CHECK(fold(Tri::kAbsent, Tri::kYes) == Tri::kYes);
  CHECK(fold(Tri::kAbsent, Tri::kAbsent) == Tri::kAbsent);
  CHECK(fold(Tri::kUnknown, Tri::kYes) == Tri::kYes);
  CHECK(fold(Tri::kYes, Tri::kNo) == Tri::kNo);
  CHECK(fold(Tri::kNo, Tri::kUnknown) == Tri::kNo);
  CHECK(fold(Tri::kUnknown, Tri::kUnknown) == Tri::kUnknown);
}

TEST_CASE("collector on a fixture tree whose netdev is not in this namespace", "[fixtures]") {
  ndtest::TempTree t;
  const std::string netdev = "rdmandabsent0";  // never a real interface
  write_ecn(t, netdev, "roce_np", 0x08);
  write_ecn(t, netdev, "roce_rp", 0x08);
  auto host = host_with(t, {{"mlx5_0", model::LinkLayer::kEthernet}, {"mlx5_1", model::LinkLayer::kInfiniBand}}, netdev);
  auto collector = make_collector();
  exporter::ErrorReporter errors("netdev");
  MetricSink out = scrape(*collector, host, errors, 3);
  CHECK(errors.counts() == std::map<std::string, std::uint64_t>{{"netdev_missing", 1}});
  CHECK(errors.capabilities() == std::map<std::string, bool>{{"ecn_sysfs", true}});
  CHECK(find(out, "rdma_netdev_present", {{"device", "mlx5_0"}, {"netdev", netdev}})->number() == 0);
  CHECK(find(out, "rdma_netdev_ecn_enabled", {{"device", "mlx5_0"}, {"role", "rp"}, {"priority", "3"}})->number() == 1);
  // ECN on, PFC unreadable: not consistent, reason pfc_unknown
  CHECK(find(out, "rdma_netdev_roce_priority_consistent", {{"device", "mlx5_0"}, {"port", "1"}, {"reason", "pfc_unknown"}})->number() == 0);
  // the InfiniBand port is not this collector's
  CHECK_FALSE(find(out, "rdma_netdev_present", {{"device", "mlx5_1"}}));
  CHECK_FALSE(find(out, "rdma_netdev_roce_priority_consistent", {{"device", "mlx5_1"}}));
}

TEST_CASE("collector: a tree's netdev that is not this kernel's netdev of that name is state, not an error", "[fixtures]") {
  // The tree names lo, as this namespace has, but with another ifindex: a fake tree's lo.
  ndtest::TempTree t;
  const unsigned kernel_lo = if_nametoindex("lo");
  REQUIRE(kernel_lo > 0);
  t.write("class/net/lo/ifindex", std::to_string(kernel_lo + 1000000) + "\n");
  write_ecn(t, "lo", "roce_np", 0x08);
  write_ecn(t, "lo", "roce_rp", 0x08);
  auto host = host_with(t, {{"mlx5_0", model::LinkLayer::kEthernet}}, "lo");
  auto collector = make_collector();
  exporter::ErrorReporter errors("netdev");
  MetricSink out = scrape(*collector, host, errors, 3);
  CHECK(errors.counts().empty());
  CHECK(find(out, "rdma_netdev_present", {{"netdev", "lo"}})->number() == 0);
  CHECK(find(out, "rdma_netdev_ecn_enabled", {{"netdev", "lo"}, {"role", "rp"}, {"priority", "3"}})->number() == 1);
  CHECK_FALSE(find(out, "rdma_netdev_info"));  // no ethtool to this host's lo

  // The same name with the kernel's ifindex: the kernel's lo, read through ethtool.
  t.write("class/net/lo/ifindex", std::to_string(kernel_lo) + "\n");
  CHECK(find(scrape(*collector, host, errors), "rdma_netdev_present", {{"netdev", "lo"}})->number() == 1);
}

TEST_CASE("collector: a bond's slaves are read, each with its own labels, the bond itself is not", "[fixtures]") {
  ndtest::TempTree t;
  const std::vector<std::pair<std::string, unsigned>> slaves{{"rdmandslave0", 0x08}, {"rdmandslave1", 0x28}};
  for (const auto& [nd, rp_mask] : slaves) {
    t.write("class/net/" + nd + "/ifindex", "1000001\n");  // not this kernel's: only the tree is read
    write_ecn(t, nd, "roce_np", 0x08);
    write_ecn(t, nd, "roce_rp", rp_mask);
  }
  auto host = host_with(t, {{"mlx5_bond_0", model::LinkLayer::kEthernet}}, "rdmandbond0");
  auto& netdevs = host.devices[0].ports[0].netdevs;
  netdevs[0].bond = true;
  for (const auto& [nd, mask] : slaves) netdevs.push_back({nd, "bond_slave"});
  auto collector = make_collector();
  exporter::ErrorReporter errors("netdev");
  MetricSink out = scrape(*collector, host, errors);
  CHECK(errors.counts().empty());
  CHECK_FALSE(find(out, "rdma_netdev_present", {{"netdev", "rdmandbond0"}}));
  for (const auto& [nd, mask] : slaves) {
    CHECK(find(out, "rdma_netdev_present", {{"device", "mlx5_bond_0"}, {"netdev", nd}})->number() == 0);
    CHECK(find(out, "rdma_netdev_ecn_enabled", {{"netdev", nd}, {"role", "rp"}, {"priority", "5"}})->number() ==
          ((mask >> 5) & 1));
  }
}

TEST_CASE("collector on a netdev without an ECN tree: state, not an error", "[fixtures]") {
  ndtest::TempTree t;
  const std::string netdev = "rdmandabsent2";  // an inbox driver: no class/net/<if>/ecn
  auto host = host_with(t, {{"mlx5_0", model::LinkLayer::kEthernet}}, netdev);
  auto collector = make_collector();
  exporter::ErrorReporter errors("netdev");
  for (int i = 0; i < 3; ++i) {
    MetricSink s;
    collector->collect(exporter::ScrapeContext{host, errors}, s);
    CHECK_FALSE(find(s, "rdma_netdev_ecn_enabled"));
    CHECK(find(s, "rdma_netdev_roce_priority_consistent", {{"device", "mlx5_0"}, {"reason", "pfc_unknown"}}));
  }
  CHECK(errors.counts() == std::map<std::string, std::uint64_t>{{"netdev_missing", 1}});
  CHECK(errors.capabilities() == std::map<std::string, bool>{{"ecn_sysfs", false}});
}

TEST_CASE("collector settings: RoCE priority and allow-list are validated", "[unit]") {
  ndtest::TempTree t;
  const std::string netdev = "rdmandabsent1";
  write_ecn(t, netdev, "roce_np", 0x20);
  write_ecn(t, netdev, "roce_rp", 0x20);
  auto host = host_with(t, {{"mlx5_0", model::LinkLayer::kEthernet}}, netdev);
  auto collector = make_collector({{"roce-priority", "5"}});
  exporter::ErrorReporter errors("netdev");
  MetricSink out;
  collector->collect(exporter::ScrapeContext{host, errors}, out);
  CHECK(find(out, "rdma_netdev_roce_priority_consistent", {{"priority", "5"}, {"reason", "pfc_unknown"}}));
  CHECK_THROWS_AS(make_collector({{"roce-priority", "8"}}), exporter::ConfigError);
  CHECK_THROWS_AS(make_collector({{"extra-stats", std::string(40, 'x')}}), exporter::ConfigError);
  CHECK_NOTHROW(make_collector({{"extra-stats", "rx_queue_0_xdp_packets,peer_ifindex"}}));
}
