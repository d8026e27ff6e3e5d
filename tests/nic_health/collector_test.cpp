// The nic_health collector on fixtures: hwmon sensors under a PCI function in the kernel's
// formats (Documentation/hwmon/sysfs-interface.rst: millidegrees, temp<N>_label), the
// transceiver samples of a decoded module, devlink samples, and the kernel-log matcher and reader
// on mlx5's and the networking core's own message formats.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "collectors/nic_health/kmsg_reader.h"
#include "collectors/nic_health/nic_health_metrics.h"
#include "exporter/collector.h"
#include "exporter/options.h"
#include "tests/lib/samples.h"
#include "tests/lib/temp_tree.h"

using namespace rdma;
using namespace rdma::testing;
namespace nh = rdma::collectors::nic_health;

namespace {

std::unique_ptr<exporter::Collector> make_collector(const std::vector<std::pair<std::string, std::string>>& flags = {}) {
  const exporter::CollectorDescriptor* desc = nullptr;
  for (const auto* d : exporter::registered_collectors())
    if (d->name == "nic_health") desc = d;
  REQUIRE(desc);
  exporter::Options options;
  for (const auto& s : desc->settings)
    options.declare({"collector.nic_health." + s.key, s.type, s.default_value, s.help, ""});
  std::vector<std::string> args{"test"};
  for (const auto& [k, v] : flags) args.push_back("--collector.nic_health." + k + "=" + v);
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  options.resolve(options.parse_command_line(static_cast<int>(argv.size()), argv.data()));
  exporter::CollectorSettings settings(options, "nic_health");
  return desc->create(settings, exporter::GlobalContext{"/sys", "/proc"});
}

// An mlx5 InfiniBand HCA as sysfs has it: class/infiniband/<dev>/device -> the PCI function,
// whose hwmon device mlx5 registers (drivers/net/ethernet/mellanox/mlx5/core/hwmon.c: channel
// "asic", then one "Module<N>" per module sensor; temp*_crit and temp*_emergency from the
// sensor's thresholds, temp*_highest its history).
model::HostModel mlx5_ib_host(const TempTree& t) {
  const std::string pci = "devices/pci0000:00/0000:00:01.0/0000:08:00.0";
  const std::string hw = pci + "/hwmon/hwmon3/";
  t.write(hw + "name", "mlx5\n");
  t.write(hw + "temp1_input", "54000\n");
  t.write(hw + "temp1_label", "asic\n");
  t.write(hw + "temp1_crit", "105000\n");
  t.write(hw + "temp1_emergency", "120000\n");
  t.write(hw + "temp1_highest", "61000\n");
  t.write(hw + "temp2_input", "-2500\n");
  t.write(hw + "temp2_label", "Module0\n");
  t.write(hw + "temp2_crit", "75000\n");
  t.write(hw + "temp3_label", "Module1\n");  // its sensor unreadable (empty cage): no temp3_input
  std::filesystem::create_directories(t.root() + "/class/infiniband/mlx5_0");
  std::filesystem::create_directory_symlink("../../../" + pci, t.root() + "/class/infiniband/mlx5_0/device");
  model::HostModel h;
  h.sysfs_root = t.root();
  model::DeviceModel d;
  d.name = "mlx5_0";
  d.path = t.root() + "/class/infiniband/mlx5_0";
  d.driver = "mlx5";
  model::PortModel p;
  p.number = 1;
  p.number_label = "1";
  p.link_layer = model::LinkLayer::kInfiniBand;
  d.ports.push_back(p);
  h.devices.push_back(d);
  return h;
}

}  // namespace

TEST_CASE("hwmon under the PCI function: ASIC and module temperatures of an InfiniBand HCA", "[fixtures]") {
  TempTree t("nic_health");
  const auto host = mlx5_ib_host(t);
  auto c = make_collector({{"devlink", "false"}});
  exporter::ErrorReporter errors("nic_health");
  MetricSink out;
  c->collect(exporter::ScrapeContext{host, errors}, out);
  CHECK(dbl(out, "rdma_nic_temperature_celsius", {{"device", "mlx5_0"}, {"sensor", "asic"}}) == Approx(54.0));
  CHECK(dbl(out, "rdma_nic_temperature_celsius", {{"device", "mlx5_0"}, {"sensor", "Module0"}}) == Approx(-2.5));
  CHECK(count(out, "rdma_nic_temperature_celsius") == 2);  // Module1 has no reading
  CHECK(dbl(out, "rdma_nic_temperature_threshold_celsius", {{"device", "mlx5_0"}, {"sensor", "asic"}, {"kind", "crit"}}) ==
        Approx(105.0));
  CHECK(dbl(out, "rdma_nic_temperature_threshold_celsius",
            {{"device", "mlx5_0"}, {"sensor", "asic"}, {"kind", "emergency"}}) == Approx(120.0));
  CHECK(dbl(out, "rdma_nic_temperature_highest_celsius", {{"device", "mlx5_0"}, {"sensor", "asic"}}) == Approx(61.0));
  CHECK(errors.total() == 0);
  CHECK(count(out, "rdma_transceiver_info") == 0);  // no netdev: nothing asked over ethtool
}

TEST_CASE("hwmon parse: unnumbered, garbage and unlabelled channels", "[unit]") {
  auto s = nh::parse_hwmon({{"temp1_input", "41000\n"}, {"temp_input", "1"}, {"tempX_input", "1"},
                            {"temp2_input", "garbage"}, {"temp9999_input", "1000"}, {"temp4_label", "bad\x01label\n"},
                            {"temp4_input", "1000\n"}, {"in0_input", "12000"}});
  REQUIRE(s.size() == 2);
  CHECK(s[0].sensor == "temp1");
  CHECK(*s[0].input == Approx(41.0));
  CHECK(s[1].sensor == "badlabel");
}

TEST_CASE("transceiver samples: identity, monitors, thresholds and only the flags that are set", "[unit]") {
  ethtool::ModuleInfo m;
  m.spec = ethtool::ModuleSpec::kCmis;
  m.identifier_name = "QSFP-DD";
  m.spec_revision = "5.0";
  m.vendor = "INNOLIGHT";
  m.temperature_celsius = 78.25;
  m.supply_volts = 3.28;
  m.temperature_flags.high_alarm = true;
  m.temperature_thresholds = ethtool::Thresholds{75, -5, 72, 0};
  ethtool::LaneMonitors l;
  l.lane = 2;
  l.rx_power_watts = 0.0;
  l.rx_los = true;
  l.tx_fault = false;
  l.rx_power_flags.low_alarm = true;
  m.lanes.push_back(l);
  const Labels base{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "ens1f0np0"}};
  MetricSink out;
  nh::emit_transceiver(base, m, out);
  auto with = [&](Labels extra) { Labels x = base; x.insert(x.end(), extra.begin(), extra.end()); return x; };
  CHECK(find(out, "rdma_transceiver_info", {{"identifier", "QSFP-DD"}, {"spec", "cmis"}, {"vendor", "INNOLIGHT"}}));
  CHECK(dbl(out, "rdma_transceiver_temperature_celsius", base) == Approx(78.25));
  CHECK(dbl(out, "rdma_transceiver_temperature_threshold_celsius", with({{"level", "high_alarm"}})) == Approx(75));
  CHECK(dbl(out, "rdma_transceiver_module_alarm", with({{"monitor", "temperature"}, {"level", "high_alarm"}})) == 1);
  CHECK(count(out, "rdma_transceiver_module_alarm") == 1);
  CHECK(dbl(out, "rdma_transceiver_lane_fault", with({{"lane", "2"}, {"fault", "rx_los"}})) == 1);
  CHECK(count(out, "rdma_transceiver_lane_fault") == 1);
  CHECK(dbl(out, "rdma_transceiver_lane_alarm", with({{"lane", "2"}, {"monitor", "rx_power"}, {"level", "low_alarm"}})) == 1);
  CHECK(dbl(out, "rdma_transceiver_rx_power_watts", with({{"lane", "2"}})) == 0.0);
  CHECK(u64(out, "rdma_transceiver_flags", base) == 3u);
}

TEST_CASE("devlink samples: reporters, versions and a pending firmware update", "[unit]") {
  devlink::HealthReporter r{.handle = {"pci", "0000:08:00.0"}, .name = "fw_fatal", .healthy = false, .error_count = 2,
                            .recover_count = 1, .graceful_period_ms = 1200000, .auto_recover = true};
  devlink::DeviceInfo info{.handle = {"pci", "0000:08:00.0"}, .driver = "mlx5_core", .serial = "MT1",
                           .running = {{"fw.version", "28.39.1002"}}, .stored = {{"fw.version", "28.40.1000"}}};
  const Labels base{{"device", "mlx5_0"}, {"devlink", "pci/0000:08:00.0"}};
  MetricSink out;
  nh::emit_health_reporter(base, r, out);
  nh::emit_devlink_info(base, info, out);
  Labels rl = base;
  rl.push_back({"reporter", "fw_fatal"});
  rl.push_back({"devlink_port", ""});
  CHECK(dbl(out, "rdma_devlink_health_reporter_healthy", rl) == 0);
  CHECK(u64(out, "rdma_devlink_health_reporter_errors_total", rl) == 2u);
  CHECK(u64(out, "rdma_devlink_health_reporter_recoveries_total", rl) == 1u);
  CHECK(dbl(out, "rdma_devlink_health_reporter_graceful_period_seconds", rl) == Approx(1200));
  CHECK(find(out, "rdma_devlink_version_info", {{"kind", "stored"}, {"name", "fw.version"}, {"value", "28.40.1000"}}));
  CHECK(dbl(out, "rdma_devlink_firmware_update_pending", base) == 1);
}

TEST_CASE("kernel log: the fault table on mlx5 and core message formats, devices from the model only", "[unit]") {
  // Records as /dev/kmsg gives the kernel's own lines: facility 0, dev_printk()'s prefix, and the
  // SUBSYSTEM/DEVICE properties the kernel attaches to a device's lines.
  nh::KmsgReader reader("/nonexistent");
  reader.set_device_names({{"0000:08:00.0", "mlx5_0"}, {"mlx5_0", "mlx5_0"}, {"ens1f0np0", "mlx5_0"}});
  reader.consume(
      "3,1001,5001,-;mlx5_core 0000:08:00.0: cmd_work_handler:877:(pid 1234): cmd[13]: ACCESS_REG(0x805) No done completion\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      "3,1002,5002,-;mlx5_core 0000:08:00.0: wait_func:1127:(pid 1234): ACCESS_REG(0x805) timeout. Will cause a leak of a command resource\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      "4,1003,5003,-;mlx5_core 0000:09:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:09:00.0\n"
      "4,1004,5004,-;mlx5_core 0000:08:00.0: mlx5_pcie_event:301:(pid 77): Detected insufficient power on the PCIe slot (27W).\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      "4,1005,5005,-;mlx5_core 0000:08:00.0 ens1f0np0: Port module event[error]: module 0, Cable error, High Temperature\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      // The TX watchdog since 6.7 (netdev_crit) and before it (WARN_ONCE, no device prefix).
      "2,1006,5006,-;mlx5_core 0000:08:00.0 ens1f0np0: NETDEV WATCHDOG: CPU: 3: transmit queue 3 timed out 5120 ms\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      "4,1007,5007,-;NETDEV WATCHDOG: ens1f0np0 (mlx5_core): transmit queue 3 timed out 5120 ms\n"
      "6,1008,5008,-;mlx5_core 0000:08:00.0: E-Switch: cleanup\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      "3,1009,5009,-;mlx5_core 0000:08:00.0 ens1f0np0 (unregistering): poll_health:800:(pid 0): health poll failed\n"
      " SUBSYSTEM=pci\n"
      " DEVICE=+pci:0000:08:00.0\n"
      "garbage without a header\n");
  const auto s = reader.snapshot();
  CHECK(s.records == 9);
  CHECK(s.counts.at({"cmd_timeout", "mlx5_0"}) == 1);  // only wait_func's line says timeout
  CHECK(s.counts.at({"health_poll_failed", ""}) == 1);  // 0000:09:00.0 is no RDMA device here
  CHECK(s.counts.at({"health_poll_failed", "mlx5_0"}) == 1);
  CHECK(s.counts.at({"insufficient_power", "mlx5_0"}) == 1);
  CHECK(s.counts.at({"module_high_temperature", "mlx5_0"}) == 1);
  CHECK(s.counts.at({"netdev_watchdog", "mlx5_0"}) == 2);
  CHECK(s.counts.size() == 6);
  CHECK_FALSE(nh::kmsg_message(" DEVICE=+pci:0000:08:00.0"));
  CHECK(nh::kmsg_message("6,1,2,-;text\n") == "text");
  const auto r = nh::kmsg_record("12,7,8,-,caller=T42;hello\n SUBSYSTEM=pci\n DEVICE=+pci:0000:08:00.0\n");
  REQUIRE(r);
  CHECK(r->facility == 1);
  CHECK(r->level == 4);
  CHECK(r->text == "hello");
  CHECK(r->device == "+pci:0000:08:00.0");
  const auto p = nh::driver_prefix("mlx5_core 0000:08:00.0 mlx5_0: text");
  REQUIRE(p);
  CHECK(p->driver == "mlx5_core");
  CHECK(p->pci_address == "0000:08:00.0");
  CHECK(p->name == "mlx5_0");
  CHECK(p->rest == "text");
  CHECK_FALSE(nh::driver_prefix("mlx5_core 0000:[4242]: segfault at 0"));
  CHECK_FALSE(nh::driver_prefix("NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 3 timed out"));
}

TEST_CASE("kernel log reader thread: counts records written after it started, an unreadable log is state", "[fixtures]") {
  TempTree t("nic_health_kmsg");
  const std::string log = t.root() + "/kmsg";
  t.write("kmsg", "4,1,1,-;NETDEV WATCHDOG: old line before the start\n");
  auto c = make_collector({{"kmsg", "true"}, {"kmsg-path", log}, {"devlink", "false"}});
  c->start();
  model::HostModel host;
  host.sysfs_root = t.root();
  exporter::ErrorReporter errors("nic_health");
  {
    std::ofstream(log, std::ios::app) << "4,2,2,-;NETDEV WATCHDOG: eth9 (virtio_net): transmit queue 0 timed out\n";
  }
  std::uint64_t n = 0;
  for (int i = 0; i < 200 && n == 0; ++i) {  // the reader polls every 200 ms
    MetricSink out;
    c->collect(exporter::ScrapeContext{host, errors}, out);
    n = u64(out, "rdma_kmsg_faults_total", {{"fault", "netdev_watchdog"}, {"device", ""}}).value_or(0);
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(n == 1);
  c->stop();
  CHECK(errors.total() == 0);

  auto missing = make_collector({{"kmsg", "true"}, {"kmsg-path", t.root() + "/absent"}, {"devlink", "false"}});
  missing->start();
  exporter::ErrorReporter errors2("nic_health");
  bool state_seen = false;
  for (int i = 0; i < 200 && !state_seen; ++i) {
    MetricSink out;
    missing->collect(exporter::ScrapeContext{host, errors2}, out);
    auto caps = errors2.capabilities();
    state_seen = caps.count("kmsg") && !caps.at("kmsg");
    if (!state_seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  missing->stop();
  CHECK(state_seen);
  CHECK(errors2.total() == 0);
}
