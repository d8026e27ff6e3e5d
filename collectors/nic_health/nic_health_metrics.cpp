#include "collectors/nic_health/nic_health_metrics.h"

#include <algorithm>
#include <cmath>

#include "sources/sysfs/parse.h"

namespace rdma::collectors::nic_health {
namespace {

Labels with(const Labels& base, std::initializer_list<std::pair<std::string, std::string>> extra) {
  Labels l = base;
  for (const auto& e : extra) l.push_back(e);
  return l;
}

constexpr const char* kLevels[] = {"high_alarm", "low_alarm", "high_warning", "low_warning"};

void emit_thresholds(const Labels& base, const char* name, const char* help, const std::optional<ethtool::Thresholds>& t,
                     MetricSink& out) {
  if (!t) return;
  const double v[] = {t->high_alarm, t->low_alarm, t->high_warning, t->low_warning};
  for (int i = 0; i < 4; ++i) out.gauge(name, help, with(base, {{"level", kLevels[i]}}), v[i]);
}

// Flags are exported only while set (value 1): a healthy module has none of these series, which
// keeps an 8-lane module's 136 possible flags out of the node's budget; rdma_transceiver_flags
// counts them so that "no flags" is a sample too.
void emit_flags(const char* name, const char* help, const Labels& base, const char* monitor, const ethtool::AlarmFlags& f,
                MetricSink& out, unsigned& count) {
  const bool set[] = {f.high_alarm, f.low_alarm, f.high_warning, f.low_warning};
  for (int i = 0; i < 4; ++i) {
    if (!set[i]) continue;
    ++count;
    out.gauge(name, help, with(base, {{"monitor", monitor}, {"level", kLevels[i]}}), 1);
  }
}

}  // namespace

void emit_transceiver(const Labels& base, const ethtool::ModuleInfo& m, MetricSink& out) {
  out.info("rdma_transceiver_info",
           "Transceiver module of the netdev (module EEPROM, SFF-8636 or CMIS): identifier, spec, vendor, part number, "
           "serial, revision. Always 1.",
           with(base, {{"identifier", m.identifier_name},
                       {"spec", std::string(ethtool::module_spec_label(m.spec))},
                       {"spec_revision", m.spec_revision},
                       {"vendor", m.vendor},
                       {"part_number", m.part_number},
                       {"serial", m.serial},
                       {"revision", m.revision}}));
  if (m.temperature_celsius)
    out.gauge("rdma_transceiver_temperature_celsius", "Module temperature reported by the transceiver.", base,
              *m.temperature_celsius);
  if (m.supply_volts)
    out.gauge("rdma_transceiver_supply_voltage_volts", "Module supply voltage (Vcc) reported by the transceiver.", base,
              *m.supply_volts);
  emit_thresholds(base, "rdma_transceiver_temperature_threshold_celsius",
                  "The module's own temperature alarm and warning thresholds (level).", m.temperature_thresholds, out);
  emit_thresholds(base, "rdma_transceiver_supply_voltage_threshold_volts",
                  "The module's own supply voltage alarm and warning thresholds (level).", m.voltage_thresholds, out);
  emit_thresholds(base, "rdma_transceiver_tx_bias_threshold_amperes",
                  "The module's own laser bias current thresholds (level), for every lane.", m.tx_bias_thresholds, out);
  emit_thresholds(base, "rdma_transceiver_tx_power_threshold_watts",
                  "The module's own transmit optical power thresholds (level), for every lane.", m.tx_power_thresholds, out);
  emit_thresholds(base, "rdma_transceiver_rx_power_threshold_watts",
                  "The module's own receive optical power thresholds (level), for every lane.", m.rx_power_thresholds, out);
  for (const auto& l : m.lanes) {
    const Labels lane = with(base, {{"lane", std::to_string(l.lane)}});
    if (l.tx_bias_amperes)
      out.gauge("rdma_transceiver_tx_bias_amperes", "Laser bias current of the lane.", lane, *l.tx_bias_amperes);
    if (l.tx_power_watts)
      out.gauge("rdma_transceiver_tx_power_watts", "Transmit optical power of the lane.", lane, *l.tx_power_watts);
    if (l.rx_power_watts)
      out.gauge("rdma_transceiver_rx_power_watts", "Receive optical power of the lane (average or OMA, as the module measures).",
                lane, *l.rx_power_watts);
  }
  unsigned count = 0;
  constexpr const char* kModuleHelp =
      "1 while the module raises the flag: monitor temperature or supply_voltage over or under its own threshold (level). "
      "Only set flags are exported.";
  emit_flags("rdma_transceiver_module_alarm", kModuleHelp, base, "temperature", m.temperature_flags, out, count);
  emit_flags("rdma_transceiver_module_alarm", kModuleHelp, base, "supply_voltage", m.voltage_flags, out, count);
  constexpr const char* kLaneHelp =
      "1 while the module raises the lane's flag: monitor tx_bias, tx_power or rx_power over or under its own threshold "
      "(level). Only set flags are exported.";
  constexpr const char* kFaultHelp =
      "1 while the lane reports the fault: rx_los, tx_los (loss of signal), tx_fault, rx_cdr_lol, tx_cdr_lol (CDR loss of "
      "lock). Only set faults are exported.";
  for (const auto& l : m.lanes) {
    const Labels lane = with(base, {{"lane", std::to_string(l.lane)}});
    emit_flags("rdma_transceiver_lane_alarm", kLaneHelp, lane, "tx_bias", l.tx_bias_flags, out, count);
    emit_flags("rdma_transceiver_lane_alarm", kLaneHelp, lane, "tx_power", l.tx_power_flags, out, count);
    emit_flags("rdma_transceiver_lane_alarm", kLaneHelp, lane, "rx_power", l.rx_power_flags, out, count);
    const std::pair<const char*, const std::optional<bool>*> faults[] = {
        {"rx_los", &l.rx_los}, {"tx_los", &l.tx_los}, {"tx_fault", &l.tx_fault},
        {"rx_cdr_lol", &l.rx_cdr_lol}, {"tx_cdr_lol", &l.tx_cdr_lol}};
    for (const auto& [name, v] : faults) {
      if (!v->value_or(false)) continue;
      ++count;
      out.gauge("rdma_transceiver_lane_fault", kFaultHelp, with(lane, {{"fault", name}}), 1);
    }
  }
  out.gauge_u64("rdma_transceiver_flags", "Alarm, warning and fault flags the module raises now (0 on a healthy module).",
                base, count);
}

std::vector<HwmonTemperature> parse_hwmon(const std::map<std::string, std::string>& files) {
  std::map<unsigned, HwmonTemperature> by_index;
  for (const auto& [name, content] : files) {
    // temp<N>_<attr>: hwmon numbers channels from 1 (Documentation/hwmon/sysfs-interface.rst).
    if (name.rfind("temp", 0) != 0) continue;
    const auto us = name.find('_');
    if (us == std::string::npos || us == 4) continue;
    const std::string num = name.substr(4, us - 4);
    if (num.size() > 3 || !std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    const unsigned idx = static_cast<unsigned>(std::stoul(num));
    const std::string attr = name.substr(us + 1);
    HwmonTemperature& t = by_index[idx];
    if (attr == "label") {
      std::string label(sysfs::trim_value(content));
      label.erase(std::remove_if(label.begin(), label.end(), [](char c) { return c < 0x20 || c >= 0x7f; }), label.end());
      if (label.size() > 64) label.resize(64);
      t.sensor = label;
      continue;
    }
    // Signed millidegrees; a sensor that cannot be read gives an error on read (the file is
    // absent from `files`) or a non-number, and its value is left out.
    const std::string_view v = sysfs::trim_value(content);
    std::optional<double> celsius;
    if (!v.empty()) {
      const bool neg = v[0] == '-';
      if (auto u = sysfs::parse_u64(neg ? v.substr(1) : v); u && *u < (1ull << 40))
        celsius = (neg ? -1.0 : 1.0) * static_cast<double>(*u) / 1000.0;
    }
    if (attr == "input") t.input = celsius;
    else if (attr == "highest") t.highest = celsius;
    else if (attr == "crit") t.crit = celsius;
    else if (attr == "emergency") t.emergency = celsius;
    else if (attr == "max") t.max = celsius;
  }
  std::vector<HwmonTemperature> out;
  for (auto& [idx, t] : by_index) {
    if (!t.input) continue;  // a channel without a reading is not a sensor
    if (t.sensor.empty()) t.sensor = "temp" + std::to_string(idx);
    out.push_back(std::move(t));
  }
  return out;
}

void emit_hwmon(const Labels& base, const std::vector<HwmonTemperature>& sensors, MetricSink& out) {
  for (const auto& s : sensors) {
    const Labels l = with(base, {{"sensor", s.sensor}});
    out.gauge("rdma_nic_temperature_celsius",
              "Temperature of a sensor the RDMA device's driver registers in hwmon under its PCI function (mlx5: asic, "
              "Module<N>).",
              l, *s.input);
    const std::pair<const char*, const std::optional<double>*> limits[] = {
        {"max", &s.max}, {"crit", &s.crit}, {"emergency", &s.emergency}};
    for (const auto& [kind, v] : limits)
      if (*v)
        out.gauge("rdma_nic_temperature_threshold_celsius",
                  "The sensor's limits as the driver reports them (kind: max, crit, emergency; hwmon temp*_<kind>).",
                  with(l, {{"kind", kind}}), **v);
    if (s.highest)
      out.gauge("rdma_nic_temperature_highest_celsius", "Highest temperature the sensor recorded (hwmon temp*_highest).", l,
                *s.highest);
  }
}

void emit_health_reporter(const Labels& base, const devlink::HealthReporter& r, MetricSink& out) {
  const Labels l = with(base, {{"reporter", r.name}, {"devlink_port", r.port ? std::to_string(*r.port) : ""}});
  out.gauge("rdma_devlink_health_reporter_healthy",
            "1 when the devlink health reporter (mlx5 fw, fw_fatal, tx, rx, vnic, ...) is healthy, 0 in error.", l,
            r.healthy ? 1 : 0);
  out.counter("rdma_devlink_health_reporter_errors_total", "Errors the devlink health reporter has seen.", l, r.error_count);
  out.counter("rdma_devlink_health_reporter_recoveries_total", "Recoveries the devlink health reporter has run.", l,
              r.recover_count);
  if (r.graceful_period_ms)
    out.gauge("rdma_devlink_health_reporter_graceful_period_seconds",
              "Minimum time between two automatic recoveries of the reporter.", l,
              static_cast<double>(*r.graceful_period_ms) / 1000.0);
  if (r.auto_recover)
    out.gauge("rdma_devlink_health_reporter_auto_recover", "1 when the reporter recovers automatically.", l,
              *r.auto_recover ? 1 : 0);
}

void emit_devlink_info(const Labels& base, const devlink::DeviceInfo& info, MetricSink& out) {
  out.info("rdma_devlink_info", "devlink dev info of the RDMA device's PCI function: driver and serial number. Always 1.",
           with(base, {{"driver", info.driver}, {"serial_number", info.serial}}));
  const std::pair<const char*, const std::vector<devlink::Version>*> kinds[] = {
      {"fixed", &info.fixed}, {"running", &info.running}, {"stored", &info.stored}};
  for (const auto& [kind, versions] : kinds)
    for (const auto& v : *versions)
      out.info("rdma_devlink_version_info",
               "A version devlink dev info reports (kind fixed: board; running: in use; stored: flashed, used after the next "
               "reset). Always 1.",
               with(base, {{"kind", kind}, {"name", v.name}, {"value", v.value}}));
  if (!info.stored.empty())
    out.gauge("rdma_devlink_firmware_update_pending",
              "1 when a stored (flashed) version differs from the running one of the same name: a firmware update waits for "
              "a reset.",
              base, info.update_pending() ? 1 : 0);
}

}  // namespace rdma::collectors::nic_health
