// Typed samples of the nic_health collector as pure functions of decoded data (transceiver
// pages, hwmon sensors, devlink replies, kernel-log counts), so that the fixture tests drive
// exactly the code a scrape runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "exporter/metrics.h"
#include "sources/devlink/devlink.h"
#include "sources/ethtool/module_eeprom.h"

namespace rdma::collectors::nic_health {

using exporter::Labels;
using exporter::MetricSink;

// base = {device, port, netdev}: rdma_transceiver_* for one module.
void emit_transceiver(const Labels& base, const ethtool::ModuleInfo& m, MetricSink& out);

// One temperature sensor of a PCI function's hwmon device (millidegrees in sysfs).
struct HwmonTemperature {
  std::string sensor;  // temp<N>_label ("asic", "Module0"), else "temp<N>"
  std::optional<double> input, highest, crit, emergency, max;  // celsius
};
// Pure: the file names and contents of one hwmon<N>/ directory -> its temperature sensors.
std::vector<HwmonTemperature> parse_hwmon(const std::map<std::string, std::string>& files);
// base = {device}: rdma_nic_temperature_*{device,sensor}.
void emit_hwmon(const Labels& base, const std::vector<HwmonTemperature>& sensors, MetricSink& out);

// base = {device, devlink}: reporters and info of one devlink instance.
void emit_health_reporter(const Labels& base, const devlink::HealthReporter& r, MetricSink& out);
void emit_devlink_info(const Labels& base, const devlink::DeviceInfo& info, MetricSink& out);

}  // namespace rdma::collectors::nic_health
