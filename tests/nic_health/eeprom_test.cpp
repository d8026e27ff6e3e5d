// Module EEPROM: the SFF-8636, CMIS and SFF-8472 decoder on page sets (data/*.pages, built by
// make_pages.py at the specs' addresses) against what ethtool's own decoder prints for the same
// pages (data/*.ethtool-m.txt: ethtool 5.19's `ethtool -m` netlink path, qsfp.c/cmis.c, fed the
// pages through its nl_get_eeprom_page(); see data/README.md), the read plan, the netlink codec
// in the kernel's layout, and what cut, missing and mutated pages decode to.
#include <catch2/catch.hpp>

#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <limits>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "collectors/nic_health/nic_health_metrics.h"
#include "sources/ethtool/module_eeprom.h"
#include "sources/netlink/genetlink.h"
#include "tests/lib/samples.h"

using namespace rdma;
using ethtool::ModuleMemory;

namespace {

ModuleMemory load_pages(const std::string& name) {
  std::ifstream in(std::string(NIC_HEALTH_DATA) + "/" + name + ".pages");
  REQUIRE(in);
  ModuleMemory m;
  std::vector<std::uint8_t>* cur = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    unsigned bank = 0, page = 0, offset = 0, i2c = 0;
    const int fields = std::sscanf(line.c_str(), "page %u %u %u %x", &bank, &page, &offset, &i2c);
    if (fields == 4 && i2c == ethtool::kSff8472DiagnosticsI2cAddress) {
      cur = &m.diagnostics;
      continue;
    }
    if (fields == 3) {
      cur = offset == 0 ? &m.lower : &m.upper[{static_cast<std::uint8_t>(bank), static_cast<std::uint8_t>(page)}];
      continue;
    }
    REQUIRE(cur != nullptr);
    std::istringstream row(line.substr(line.find(':') + 1));
    unsigned b = 0;
    while (row >> std::hex >> b) cur->push_back(static_cast<std::uint8_t>(b));
  }
  return m;
}

// "\tName : value" lines of `ethtool -m` output.
std::map<std::string, std::string> load_ethtool(const std::string& name) {
  std::ifstream in(std::string(NIC_HEALTH_DATA) + "/" + name + ".ethtool-m.txt");
  REQUIRE(in);
  std::map<std::string, std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(" : ");
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(0, key.find_first_not_of(" \t"));
    key.erase(key.find_last_not_of(' ') + 1);
    out[key] = line.substr(colon + 3);
  }
  return out;
}

// The number ethtool prints first in a value ("6.500 mA", "0.8500 mW / -0.71 dBm"), in base units.
double ethtool_number(const std::map<std::string, std::string>& e, const std::string& key, double to_base) {
  auto it = e.find(key);
  INFO(key);
  REQUIRE(it != e.end());
  return std::stod(it->second) * to_base;
}
bool ethtool_on(const std::map<std::string, std::string>& e, const std::string& key) {
  auto it = e.find(key);
  INFO(key);
  REQUIRE(it != e.end());
  return it->second == "On";
}
std::string lane_key(const char* fmt, unsigned lane) {
  char buf[96];
  std::snprintf(buf, sizeof buf, fmt, lane);
  return buf;
}

// The values ethtool prints with 3-4 decimals: equal within half their last digit.
void near(double ours, double theirs, double last_digit) { CHECK(std::fabs(ours - theirs) <= last_digit / 2 + 1e-12); }

void check_thresholds(const std::optional<ethtool::Thresholds>& t, const std::map<std::string, std::string>& e,
                      const std::string& prefix, double to_base, double digit) {
  REQUIRE(t.has_value());
  near(t->high_alarm, ethtool_number(e, prefix + " high alarm threshold", to_base), digit);
  near(t->low_alarm, ethtool_number(e, prefix + " low alarm threshold", to_base), digit);
  near(t->high_warning, ethtool_number(e, prefix + " high warning threshold", to_base), digit);
  near(t->low_warning, ethtool_number(e, prefix + " low warning threshold", to_base), digit);
}

}  // namespace

TEST_CASE("SFF-8636 QSFP28 pages decode as ethtool prints them, with lane 3's LOS and Rx power alarm", "[unit]") {
  const auto mem = load_pages("qsfp28_sr4_rx_los");
  const auto e = load_ethtool("qsfp28_sr4_rx_los");
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  const auto& m = r.value;
  CHECK(m.spec == ethtool::ModuleSpec::kSff8636);
  CHECK(m.identifier_name == "QSFP28");
  CHECK(m.vendor == e.at("Vendor name"));
  CHECK(m.part_number == e.at("Vendor PN"));
  CHECK(m.revision == e.at("Vendor rev"));
  CHECK(m.serial == e.at("Vendor SN"));
  REQUIRE(m.temperature_celsius);
  near(*m.temperature_celsius, ethtool_number(e, "Module temperature", 1), 0.01);
  near(*m.supply_volts, ethtool_number(e, "Module voltage", 1), 1e-4);
  REQUIRE(m.lanes.size() == 4);
  for (const auto& l : m.lanes) {
    INFO("lane " << l.lane);
    near(*l.tx_bias_amperes, ethtool_number(e, lane_key("Laser tx bias current (Channel %u)", l.lane), 1e-3), 1e-6);
    near(*l.tx_power_watts, ethtool_number(e, lane_key("Transmit avg optical power (Channel %u)", l.lane), 1e-3), 1e-7);
    near(*l.rx_power_watts, ethtool_number(e, lane_key("Rcvr signal avg optical power(Channel %u)", l.lane), 1e-3), 1e-7);
    CHECK(l.rx_power_flags.low_alarm == ethtool_on(e, lane_key("Laser rx power low alarm    (Channel %u)", l.lane)));
    CHECK(l.rx_power_flags.low_warning == ethtool_on(e, lane_key("Laser rx power low warning  (Channel %u)", l.lane)));
    CHECK(l.tx_bias_flags.high_alarm == ethtool_on(e, lane_key("Laser bias current high alarm   (Chan %u)", l.lane)));
    CHECK(l.tx_power_flags.any() == false);
    // ethtool 5.19 does not print SFF-8636 LOS/fault/LOL: byte 3 bit 2 is lane 3's Rx LOS.
    CHECK(l.rx_los == (l.lane == 3));
    CHECK(l.tx_fault == false);
    CHECK(l.rx_cdr_lol == false);
  }
  CHECK(m.lanes[2].rx_power_flags.low_alarm);
  CHECK(m.temperature_flags.high_alarm == ethtool_on(e, "Module temperature high alarm"));
  CHECK(m.voltage_flags.any() == false);
  check_thresholds(m.temperature_thresholds, e, "Module temperature", 1, 0.01);
  check_thresholds(m.voltage_thresholds, e, "Module voltage", 1, 1e-4);
  check_thresholds(m.tx_bias_thresholds, e, "Laser bias current", 1e-3, 1e-6);
  check_thresholds(m.tx_power_thresholds, e, "Laser output power", 1e-3, 1e-7);
  check_thresholds(m.rx_power_thresholds, e, "Laser rx power", 1e-3, 1e-7);
}

TEST_CASE("CMIS 5.0 QSFP-DD pages decode as ethtool prints them, with the module's temperature alarm", "[unit]") {
  const auto mem = load_pages("qsfpdd_dr4_hot");
  const auto e = load_ethtool("qsfpdd_dr4_hot");
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  const auto& m = r.value;
  CHECK(m.spec == ethtool::ModuleSpec::kCmis);
  CHECK(m.identifier_name == "QSFP-DD");
  CHECK(e.at("Revision compliance") == "Rev. " + m.spec_revision);
  CHECK(m.vendor == e.at("Vendor name"));
  CHECK(m.part_number == e.at("Vendor PN"));
  CHECK(m.revision == e.at("Vendor rev"));
  CHECK(m.serial == e.at("Vendor SN"));
  near(*m.temperature_celsius, ethtool_number(e, "Module temperature", 1), 0.01);
  near(*m.supply_volts, ethtool_number(e, "Module voltage", 1), 1e-4);
  CHECK(m.temperature_flags.high_alarm == ethtool_on(e, "Module temperature high alarm"));
  CHECK(m.temperature_flags.high_warning == ethtool_on(e, "Module temperature high warning"));
  CHECK(m.temperature_flags.low_alarm == ethtool_on(e, "Module temperature low alarm"));
  CHECK(m.voltage_flags.high_alarm == ethtool_on(e, "Module voltage high alarm"));
  CHECK(m.temperature_flags.high_alarm);
  // DR4: 4 media lanes (application 1); ethtool prints all 8 channels of bank 0.
  REQUIRE(m.lanes.size() == 4);
  for (const auto& l : m.lanes) {
    INFO("lane " << l.lane);
    near(*l.tx_bias_amperes, ethtool_number(e, lane_key("Laser tx bias current (Channel %u)", l.lane), 1e-3), 1e-6);
    near(*l.tx_power_watts, ethtool_number(e, lane_key("Transmit avg optical power (Channel %u)", l.lane), 1e-3), 1e-7);
    near(*l.rx_power_watts,
         ethtool_number(e, lane_key("Rcvr signal avg optical power (Channel %u)", l.lane), 1e-3), 1e-7);
    // ethtool 5.19 prints CMIS lane flags as `byte & chan` (the lane index, not its bit), so its
    // "(Chan N)" lines are not a reference: page 11h has lane 2's bit (0x02) set in the Tx fault
    // (0x87), Tx power low alarm (0x8C) and Tx bias high alarm (0x8F) bytes, CMIS 5.0 Table 8-77.
    CHECK(l.tx_fault == (l.lane == 2));
    CHECK(l.tx_power_flags.low_alarm == (l.lane == 2));
    CHECK(l.tx_bias_flags.high_alarm == (l.lane == 2));
    CHECK(l.rx_los == false);
    CHECK(l.rx_power_flags.any() == false);
  }
  check_thresholds(m.temperature_thresholds, e, "Module temperature", 1, 0.01);
  check_thresholds(m.voltage_thresholds, e, "Module voltage", 1, 1e-4);
  check_thresholds(m.tx_bias_thresholds, e, "Laser bias current", 1e-3, 1e-6);
  check_thresholds(m.tx_power_thresholds, e, "Laser output power", 1e-3, 1e-7);
  check_thresholds(m.rx_power_thresholds, e, "Laser rx power", 1e-3, 1e-7);
}

TEST_CASE("CMIS flat-memory OSFP copper cable: identity only, no monitors", "[unit]") {
  const auto mem = load_pages("osfp_dac_flat");
  const auto e = load_ethtool("osfp_dac_flat");
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  CHECK(r.value.identifier_name == "OSFP");
  CHECK(r.value.flat_memory);
  CHECK(r.value.vendor == e.at("Vendor name"));
  CHECK(r.value.serial == e.at("Vendor SN"));
  CHECK(e.at("Revision compliance") == "Rev. " + r.value.spec_revision);
  CHECK_FALSE(r.value.temperature_celsius);
  CHECK(r.value.lanes.empty());
  CHECK_FALSE(r.value.temperature_thresholds);
  CHECK(ethtool::read_plan(mem.lower) == std::vector<ethtool::PageRequest>{{.offset = 128, .page = 0}});
}

TEST_CASE("read plan: the pages each spec's decoder uses, as ethtool reads them", "[unit]") {
  auto plan = [](std::uint8_t id, std::uint8_t b2) {
    std::vector<std::uint8_t> lower(128, 0);
    lower[0] = id;
    lower[2] = b2;
    std::vector<unsigned> pages;
    for (const auto& r : ethtool::read_plan(lower)) {
      CHECK(r.offset == 128);
      CHECK(r.length == 128);
      pages.push_back(r.page);
    }
    return pages;
  };
  CHECK(plan(0x11, 0x00) == std::vector<unsigned>{0, 3});
  CHECK(plan(0x11, 0x04) == std::vector<unsigned>{0});  // flat_mem
  CHECK(plan(0x18, 0x00) == std::vector<unsigned>{0, 1, 2, 0x11});
  CHECK(plan(0x19, 0x80) == std::vector<unsigned>{0});
  CHECK(plan(0x03, 0x00).empty());  // SFP (SFF-8472) without digital diagnostics (byte 92 bit 6): A0h only
  CHECK(ethtool::read_plan(std::vector<std::uint8_t>(10, 0x11)).empty());
  CHECK(ethtool::is_dynamic_page(ethtool::ModuleSpec::kCmis, {.offset = 128, .page = 0x11}));
  CHECK_FALSE(ethtool::is_dynamic_page(ethtool::ModuleSpec::kCmis, {.offset = 128, .page = 2}));
  CHECK(ethtool::is_dynamic_page(ethtool::ModuleSpec::kSff8636, {.offset = 0}));
}

TEST_CASE("CMIS Tx bias multiplier scales the 2 uA unit up (CMIS 5.0 page 01h byte 160)", "[unit]") {
  auto mem = load_pages("qsfpdd_dr4_hot");
  const double x1 = *ethtool::decode_module(mem).value.lanes[0].tx_bias_amperes;
  const double thr1 = ethtool::decode_module(mem).value.tx_bias_thresholds->high_alarm;
  mem.upper[{0, 1}][160 - 128] = 0x07 | 0x08;
  CHECK(*ethtool::decode_module(mem).value.lanes[0].tx_bias_amperes == Approx(2 * x1));
  CHECK(ethtool::decode_module(mem).value.tx_bias_thresholds->high_alarm == Approx(2 * thr1));
  mem.upper[{0, 1}][160 - 128] = 0x07 | 0x10;
  CHECK(*ethtool::decode_module(mem).value.lanes[0].tx_bias_amperes == Approx(4 * x1));
  // Monitors not advertised are not reported.
  mem.upper[{0, 1}][160 - 128] = 0x04;
  auto r = ethtool::decode_module(mem);
  CHECK_FALSE(r.value.lanes[0].tx_bias_amperes);
  CHECK_FALSE(r.value.lanes[0].tx_power_watts);
  CHECK(r.value.lanes[0].rx_power_watts);
}

TEST_CASE("module EEPROM: a module of another spec is named, not decoded, and a short lower page is malformed",
          "[unit]") {
  ModuleMemory m;
  m.lower.assign(128, 0);
  m.lower[0] = 0x0B;  // DWDM-SFP/SFP+ (SFF-8024), not one of the specs decoded here
  auto r = ethtool::decode_module(m);
  CHECK(r.error == ReadError::kNotSupported);
  CHECK(r.value.identifier_name == "0x0b");
  m.lower[0] = 0x03;  // an SFP is SFF-8472: decoded (identity only without DDM)
  r = ethtool::decode_module(m);
  CHECK(r.ok());
  CHECK(r.value.identifier_name == "SFP");
  CHECK(r.value.spec == ethtool::ModuleSpec::kSff8472);
  CHECK(r.value.lanes.empty());
  m.lower.resize(127);
  CHECK(ethtool::decode_module(m).error == ReadError::kMalformed);
  CHECK(ethtool::identifier_name(0x7f) == "0x7f");
}

TEST_CASE("module EEPROM: a cut or missing page leaves the rest decoded, random bytes keep lanes and banks in range", "[unit]") {
  for (const char* name : {"qsfp28_sr4_rx_los", "qsfpdd_dr4_hot", "osfp_16_lanes_rx_los", "sfpp_lr_extcal"}) {
    const auto full = load_pages(name);
    for (const auto& [key, bytes] : full.upper) {
      ModuleMemory cut = full;
      cut.upper.erase(key);  // a page the module refused: its fields only are unset
      CHECK(ethtool::decode_module(cut).ok());
      for (std::size_t n : {0u, 1u, 64u, 127u}) {
        cut.upper[key].assign(bytes.begin(), bytes.begin() + static_cast<long>(n));
        CHECK(ethtool::decode_module(cut).ok());
      }
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 2000; ++i) {
      ModuleMemory m = full;
      for (auto* p : {&m.lower, &m.upper.begin()->second}) (*p)[rng() % p->size()] = static_cast<std::uint8_t>(rng());
      if (!m.diagnostics.empty()) m.diagnostics[rng() % m.diagnostics.size()] = static_cast<std::uint8_t>(rng());
      auto r = ethtool::decode_module(m);
      for (const auto& l : r.value.lanes) CHECK((l.lane >= 1 && l.lane <= 8 * ethtool::kCmisMaxBanks));
      CHECK(ethtool::bank_plan(m).size() < ethtool::kCmisMaxBanks);
    }
  }
}

// ---- SFF-8472 (SFP): A0h identity, A2h diagnostics; the expected values are what ethtool's
// sfpdiag.c prints for the same two pages (data/*.ethtool-m.txt, see data/README.md).
namespace {
void check_sfp_against_ethtool(const ethtool::ModuleInfo& m, const std::map<std::string, std::string>& e) {
  CHECK(m.spec == ethtool::ModuleSpec::kSff8472);
  CHECK(m.identifier_name == "SFP");
  CHECK(m.vendor == e.at("Vendor name"));
  CHECK(m.part_number == e.at("Vendor PN"));
  CHECK(m.revision == e.at("Vendor rev"));
  CHECK(m.serial == e.at("Vendor SN"));
  REQUIRE(m.temperature_celsius);
  near(*m.temperature_celsius, ethtool_number(e, "Module temperature", 1), 0.01);
  near(*m.supply_volts, ethtool_number(e, "Module voltage", 1), 1e-4);
  REQUIRE(m.lanes.size() == 1);
  const auto& l = m.lanes[0];
  CHECK(l.lane == 1);
  near(*l.tx_bias_amperes, ethtool_number(e, "Laser bias current", 1e-3), 1e-6);
  near(*l.tx_power_watts, ethtool_number(e, "Laser output power", 1e-3), 1e-7);
  near(*l.rx_power_watts, ethtool_number(e, "Receiver signal average optical power", 1e-3), 1e-7);
  for (const char* level : {"high alarm", "low alarm", "high warning", "low warning"}) {
    const std::string lv = level;
    auto pick = [&](const ethtool::AlarmFlags& f) {
      return lv == "high alarm" ? f.high_alarm : lv == "low alarm" ? f.low_alarm : lv == "high warning" ? f.high_warning : f.low_warning;
    };
    CHECK(pick(m.temperature_flags) == ethtool_on(e, "Module temperature " + lv));
    CHECK(pick(m.voltage_flags) == ethtool_on(e, "Module voltage " + lv));
    CHECK(pick(l.tx_bias_flags) == ethtool_on(e, "Laser bias current " + lv));
    CHECK(pick(l.tx_power_flags) == ethtool_on(e, "Laser output power " + lv));
    CHECK(pick(l.rx_power_flags) == ethtool_on(e, "Laser rx power " + lv));
  }
  check_thresholds(m.temperature_thresholds, e, "Module temperature", 1, 0.01);
  check_thresholds(m.voltage_thresholds, e, "Module voltage", 1, 1e-4);
  check_thresholds(m.tx_bias_thresholds, e, "Laser bias current", 1e-3, 1e-6);
  check_thresholds(m.tx_power_thresholds, e, "Laser output power", 1e-3, 1e-7);
  check_thresholds(m.rx_power_thresholds, e, "Laser rx power", 1e-3, 1e-7);
}
}  // namespace

TEST_CASE("SFF-8472 SFP28, internally calibrated: decodes as sfpdiag.c prints it, with its Rx power low alarm",
          "[unit]") {
  const auto mem = load_pages("sfp28_sr_rx_los");
  const auto e = load_ethtool("sfp28_sr_rx_los");
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  check_sfp_against_ethtool(r.value, e);
  CHECK_FALSE(r.value.externally_calibrated);
  CHECK(r.value.spec_revision == "0x08");
  const auto& l = r.value.lanes[0];
  CHECK(l.rx_power_flags.low_alarm);
  CHECK(l.rx_power_flags.low_warning);
  CHECK_FALSE(l.rx_power_flags.high_alarm);
  // Soft RX_LOS / TX_FAULT (A2h byte 110 bits 1, 2), advertised in A0h byte 93 bits 4, 5; sfpdiag.c
  // prints neither: checked against the bytes.
  CHECK(l.rx_los == true);
  CHECK(l.tx_fault == false);
  CHECK_FALSE(l.tx_los);  // SFF-8472 has no Tx LOS
}

TEST_CASE("SFF-8472 SFP+, externally calibrated: slope/offset and the Rx power polynomial (section 9.3)", "[unit]") {
  auto mem = load_pages("sfpp_lr_extcal");
  const auto e = load_ethtool("sfpp_lr_extcal");
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  check_sfp_against_ethtool(r.value, e);
  CHECK(r.value.externally_calibrated);
  // By hand: bias 1.5 x 2000 - 100 = 2900 x 2 uA; Tx 2 x 2500 + 50 = 5050 x 0.1 uW; Rx 10 + 1.25 x 3200.
  CHECK(*r.value.lanes[0].tx_bias_amperes == Approx(5.8e-3));
  CHECK(*r.value.lanes[0].tx_power_watts == Approx(505e-6));
  CHECK(*r.value.lanes[0].rx_power_watts == Approx(401e-6));
  CHECK(*r.value.temperature_celsius == Approx(34.0));
  CHECK_FALSE(r.value.lanes[0].rx_los);  // not advertised (A0h byte 93 bit 4 clear)
  // The higher-order terms as the spec has them (sfpdiag.c multiplies Rx_PWR(2), (3) by the
  // reading, not its powers, and drops Rx_PWR(4)): Rx_PWR(2) = 1e-4 adds 1e-4 x 3200^2 = 1024.
  auto put_float = [&](unsigned addr, float v) {
    const auto bits = std::bit_cast<std::uint32_t>(v);
    for (unsigned i = 0; i < 4; ++i) mem.diagnostics[addr + i] = static_cast<std::uint8_t>(bits >> (24 - 8 * i));
  };
  put_float(64, 1e-4f);
  r = ethtool::decode_module(mem);
  CHECK(*r.value.lanes[0].rx_power_watts == Approx((10 + 1.25 * 3200 + 1e-4f * 3200.0 * 3200.0) * 0.1e-6));
  // A hostile constant (NaN) is no reading, never a NaN sample.
  put_float(72, std::numeric_limits<float>::quiet_NaN());
  r = ethtool::decode_module(mem);
  CHECK_FALSE(r.value.lanes[0].rx_power_watts);
  CHECK_FALSE(r.value.rx_power_thresholds);
  CHECK(r.value.lanes[0].tx_bias_amperes);
}

TEST_CASE("SFF-8472 read plan: A2h at I2C 0x51 only where A0h byte 92 advertises digital diagnostics", "[unit]") {
  auto mem = load_pages("sfp28_sr_rx_los");
  const auto plan = ethtool::read_plan(mem.lower);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0] == ethtool::PageRequest{.offset = 0, .length = 128, .page = 0, .bank = 0, .i2c_address = 0x51});
  CHECK(ethtool::is_dynamic_page(ethtool::ModuleSpec::kSff8472, plan[0]));  // monitors and flags: every scrape
  // The request carries the address (ethtool netlink ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS).
  const auto req = ethtool::build_eeprom_get(0x1c, "enp1s0f0", plan[0]);
  netlink::Message msg;
  REQUIRE(netlink::read_value(netlink::Bytes(req), msg.header));
  msg.bytes = req;
  std::map<std::uint16_t, std::vector<std::uint8_t>> attrs;
  REQUIRE(netlink::for_each_attr(msg, sizeof(genlmsghdr), [&](std::uint16_t t, netlink::Bytes v) {
    attrs[t].assign(v.begin(), v.end());
  }));
  CHECK(attrs.at(ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS) == std::vector<std::uint8_t>{0x51});
  // Without DDM: no A2h read, identity only even if one was read.
  mem.lower[92] &= static_cast<std::uint8_t>(~0x40);
  CHECK(ethtool::read_plan(mem.lower).empty());
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  CHECK(r.value.vendor == "FINISAR CORP");
  CHECK_FALSE(r.value.temperature_celsius);
  CHECK(r.value.lanes.empty());
  // Without the alarm/warning flags option (A0h byte 93 bit 7): monitors, no flags.
  mem = load_pages("sfp28_sr_rx_los");
  mem.lower[93] = 0x00;
  r = ethtool::decode_module(mem);
  REQUIRE(r.value.lanes.size() == 1);
  CHECK(r.value.lanes[0].rx_power_watts);
  CHECK_FALSE(r.value.lanes[0].rx_power_flags.any());
  CHECK_FALSE(r.value.lanes[0].rx_los);
  // A2h not answered (the module needs an address change, or the driver refused): identity only.
  mem = load_pages("sfp28_sr_rx_los");
  mem.diagnostics.clear();
  r = ethtool::decode_module(mem);
  CHECK(r.ok());
  CHECK(r.value.lanes.empty());
  CHECK_FALSE(r.value.temperature_thresholds);
}

TEST_CASE("CMIS banks: a 16-lane OSFP has lanes 9-16 in bank 1's page 11h, read as page 01h byte 142 says",
          "[unit]") {
  auto mem = load_pages("osfp_16_lanes_rx_los");
  // The second step of the plan: page 11h of bank 1 (banks 0-1 advertised).
  CHECK(ethtool::bank_plan(mem) == std::vector<ethtool::PageRequest>{{.offset = 128, .page = 0x11, .bank = 1}});
  CHECK(ethtool::is_dynamic_page(ethtool::ModuleSpec::kCmis, {.offset = 128, .page = 0x11, .bank = 1}));
  auto r = ethtool::decode_module(mem);
  REQUIRE(r.ok());
  REQUIRE(r.value.lanes.size() == 16);
  for (unsigned i = 0; i < 16; ++i) {
    const auto& l = r.value.lanes[i];
    INFO("lane " << l.lane);
    CHECK(l.lane == i + 1);
    // make_pages.py: Tx power 1 mW + lane x 10 uW, bias 50 mA + lane x 0.1 mA (0.1 uW and 2 uA steps).
    CHECK(*l.tx_power_watts == Approx(0.0010 + l.lane * 0.00001).margin(0.1e-6));
    CHECK(*l.tx_bias_amperes == Approx(0.050 + l.lane * 0.0001).margin(2e-6));
    // Bank 1 page 11h: byte 0x93 (Rx LOS) and 0x96 (Rx power low alarm) have bit 2 set: its lane 3.
    CHECK(l.rx_los == (l.lane == 11));
    CHECK(l.rx_power_flags.low_alarm == (l.lane == 11));
    CHECK_FALSE(l.tx_fault.value_or(true));
  }
  CHECK(*r.value.lanes[10].rx_power_watts == Approx(1e-6));  // 1 uW: dark
  // Bank 1 not read (refused): bank 0's 8 lanes only.
  auto cut = mem;
  cut.upper.erase({1, 0x11});
  CHECK(ethtool::decode_module(cut).value.lanes.size() == 8);
  // Bank 0 only advertised: no further page asked for, bank 1's page (if any) not decoded.
  mem.upper[{0, 1}][142 - 128] = 0x00;
  CHECK(ethtool::bank_plan(mem).empty());
  CHECK(ethtool::decode_module(mem).value.lanes.size() == 8);
  // Banks 0-3 (32 lanes): banks 1-3 asked for; the reserved code 11b reads as bank 0 only.
  mem.upper[{0, 1}][142 - 128] = 0x02;
  CHECK(ethtool::bank_plan(mem).size() == 3);
  mem.upper[{0, 1}][142 - 128] = 0x03;
  CHECK(ethtool::bank_plan(mem).empty());
  // Not for SFF-8636 or a flat CMIS module.
  CHECK(ethtool::bank_plan(load_pages("osfp_dac_flat")).empty());
  CHECK(ethtool::bank_plan(load_pages("qsfp28_sr4_rx_los")).empty());
  CHECK(ethtool::bank_plan(load_pages("qsfpdd_dr4_hot")).empty());
}

TEST_CASE("transceiver series of an SFP and a 16-lane module: the cardinality docs/metrics.md states", "[unit]") {
  const exporter::Labels base{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "enp1s0f0np0"}};
  auto series = [&](const char* pages) {
    auto r = ethtool::decode_module(load_pages(pages));
    REQUIRE(r.ok());
    exporter::MetricSink out;
    collectors::nic_health::emit_transceiver(base, r.value, out);
    std::size_t n = 0;
    for (const char* f : {"rdma_transceiver_info", "rdma_transceiver_temperature_celsius",
                          "rdma_transceiver_supply_voltage_volts", "rdma_transceiver_tx_bias_amperes",
                          "rdma_transceiver_tx_power_watts", "rdma_transceiver_rx_power_watts",
                          "rdma_transceiver_temperature_threshold_celsius", "rdma_transceiver_supply_voltage_threshold_volts",
                          "rdma_transceiver_tx_bias_threshold_amperes", "rdma_transceiver_tx_power_threshold_watts",
                          "rdma_transceiver_rx_power_threshold_watts", "rdma_transceiver_module_alarm",
                          "rdma_transceiver_lane_alarm", "rdma_transceiver_lane_fault", "rdma_transceiver_flags"})
      n += testing::count(out, f);
    return n + 1;  // rdma_transceiver_present, written by the collector
  };
  // 28 with diagnostics + the set flags: Rx LOS, Rx power low alarm and low warning.
  CHECK(series("sfp28_sr_rx_los") == 28 + 3);
  CHECK(series("sfpp_lr_extcal") == 28);
  // 16 lanes: 25 + 3 x 16 = 73, + lane 11's Rx LOS and Rx power low alarm.
  CHECK(series("osfp_16_lanes_rx_los") == 73 + 2);
}

namespace {
// An ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY as eeprom_fill_reply() writes it: the header nest with
// the netdev, then DATA.
std::vector<std::uint8_t> eeprom_reply(const std::vector<std::uint8_t>& data) {
  return netlink::build_genl_request(0x1c, ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY, ETHTOOL_GENL_VERSION, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, ETHTOOL_A_MODULE_EEPROM_HEADER);
    mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_DEV_INDEX, 4);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, "ens1f0np0");
    mnl_attr_nest_end(nlh, hdr);
    mnl_attr_put(nlh, ETHTOOL_A_MODULE_EEPROM_DATA, data.size(), data.data());
  });
}
std::vector<std::uint8_t> error_reply(int err) {
  std::vector<std::uint8_t> buf(sizeof(nlmsghdr) + sizeof(nlmsgerr), 0);
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
  h->nlmsg_len = static_cast<std::uint32_t>(buf.size());
  h->nlmsg_type = NLMSG_ERROR;
  auto* e = reinterpret_cast<nlmsgerr*>(buf.data() + sizeof(nlmsghdr));
  e->error = -err;
  return buf;
}
}  // namespace

TEST_CASE("ethtool netlink module EEPROM: request attributes and reply data in the kernel's layout", "[unit]") {
  const auto req = ethtool::build_eeprom_get(0x1c, "ens1f0np0", {.offset = 128, .page = 0x11, .bank = 0});
  netlink::Message m;
  REQUIRE(netlink::read_value(netlink::Bytes(req), m.header));
  m.bytes = req;
  std::map<std::uint16_t, std::vector<std::uint8_t>> attrs;
  REQUIRE(netlink::for_each_attr(m, sizeof(genlmsghdr), [&](std::uint16_t t, netlink::Bytes v) {
    attrs[t].assign(v.begin(), v.end());
  }));
  auto u32 = [&](std::uint16_t t) { std::uint32_t v = 0; netlink::read_value(netlink::Bytes(attrs.at(t)), v); return v; };
  CHECK(u32(ETHTOOL_A_MODULE_EEPROM_OFFSET) == 128);
  CHECK(u32(ETHTOOL_A_MODULE_EEPROM_LENGTH) == 128);
  CHECK(attrs.at(ETHTOOL_A_MODULE_EEPROM_PAGE) == std::vector<std::uint8_t>{0x11});
  CHECK(attrs.at(ETHTOOL_A_MODULE_EEPROM_BANK) == std::vector<std::uint8_t>{0});
  CHECK(attrs.at(ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS) == std::vector<std::uint8_t>{0x50});

  std::vector<std::uint8_t> page(128);
  for (std::size_t i = 0; i < page.size(); ++i) page[i] = static_cast<std::uint8_t>(i);
  auto r = ethtool::decode_eeprom_reply(eeprom_reply(page));
  REQUIRE(r.ok());
  CHECK(r.value == page);
  CHECK(ethtool::decode_eeprom_reply(error_reply(EOPNOTSUPP)).error == ReadError::kNotSupported);
  CHECK(ethtool::decode_eeprom_reply(error_reply(EIO)).error == ReadError::kIo);
  auto cut = eeprom_reply(page);
  for (std::size_t n = 0; n < cut.size(); ++n)
    (void)ethtool::decode_eeprom_reply(netlink::Bytes(cut.data(), n));  // any prefix: an error, never a crash
}

namespace {

// A cage whose module the test can swap: serves the plugged module's pages and counts the reads.
struct Cage {
  ModuleMemory plugged;
  std::map<std::pair<std::uint8_t, std::uint8_t>, int> upper_reads;  // (bank, page) -> reads
  ethtool::PageReader reader() {
    return [this](const ethtool::PageRequest& r) -> Result<std::vector<std::uint8_t>> {
      using R = Result<std::vector<std::uint8_t>>;
      if (r.offset < ethtool::kModulePageLength) {
        if (r.i2c_address == ethtool::kSff8472DiagnosticsI2cAddress) return R::success(plugged.diagnostics);
        return R::success(plugged.lower);
      }
      ++upper_reads[{r.bank, r.page}];
      auto it = plugged.upper.find({r.bank, r.page});
      if (it == plugged.upper.end()) return R::failure(ReadError::kInvalid, EINVAL);
      return R::success(it->second);
    };
  }
};

// The same module type from another vendor: name, serial and temperature thresholds changed
// (identity page 00h at the spec's offsets, the threshold page's first bytes: temperature high
// alarm, SFF-8636 page 03h and CMIS page 02h byte 128).
ModuleMemory other_vendor(ModuleMemory m, std::size_t name_at, std::size_t serial_at, std::uint8_t threshold_page) {
  auto& id = m.upper.at({0, 0});
  const std::string name = "OTHERVENDOR     ", serial = "SWAPPED0000001  ";
  std::copy(name.begin(), name.end(), id.begin() + static_cast<std::ptrdiff_t>(name_at));
  std::copy(serial.begin(), serial.end(), id.begin() + static_cast<std::ptrdiff_t>(serial_at));
  auto& th = m.upper.at({0, threshold_page});
  th[0] = static_cast<std::uint8_t>(th[0] ^ 0x05);
  return m;
}

void check_swap_seen(ModuleMemory a, ModuleMemory b, std::uint8_t threshold_page) {
  const auto want_a = ethtool::decode_module(a), want_b = ethtool::decode_module(b);
  REQUIRE(want_a.ok());
  REQUIRE(want_b.ok());
  REQUIRE(want_a.value.serial != want_b.value.serial);
  REQUIRE(want_a.value.temperature_thresholds->high_alarm != want_b.value.temperature_thresholds->high_alarm);
  Cage cage{std::move(a), {}};
  auto first = ethtool::read_module_pages(cage.reader(), nullptr);
  REQUIRE(first.ok());
  CHECK(cage.upper_reads[{0, threshold_page}] == 1);
  // The same module at the next scrape: its identity page read again, its thresholds from the cache.
  auto second = ethtool::read_module_pages(cage.reader(), &first.value);
  REQUIRE(second.ok());
  CHECK(cage.upper_reads[{0, 0}] == 2);
  CHECK(cage.upper_reads[{0, threshold_page}] == 1);
  CHECK(ethtool::decode_module(second.value).value.serial == want_a.value.serial);
  // Swapped for one of the same type between scrapes: everything read again at the next one.
  cage.plugged = std::move(b);
  auto third = ethtool::read_module_pages(cage.reader(), &second.value);
  REQUIRE(third.ok());
  CHECK(cage.upper_reads[{0, threshold_page}] == 2);
  const auto got = ethtool::decode_module(third.value);
  REQUIRE(got.ok());
  CHECK(got.value.identifier == want_a.value.identifier);
  CHECK(got.value.vendor == want_b.value.vendor);
  CHECK(got.value.serial == want_b.value.serial);
  CHECK(got.value.temperature_thresholds->high_alarm == want_b.value.temperature_thresholds->high_alarm);
  // And the new module is the cached one after that.
  auto fourth = ethtool::read_module_pages(cage.reader(), &third.value);
  REQUIRE(fourth.ok());
  CHECK(cage.upper_reads[{0, threshold_page}] == 2);
  CHECK(ethtool::decode_module(fourth.value).value.temperature_thresholds->high_alarm ==
        want_b.value.temperature_thresholds->high_alarm);
}

}  // namespace

TEST_CASE("module EEPROM cache: a module swapped for one of the same type is read in full at the next scrape",
          "[fixtures]") {
  SECTION("SFF-8636 QSFP28: vendor name bytes 148-163, serial 196-211 of page 00h, thresholds page 03h") {
    auto a = load_pages("qsfp28_sr4_rx_los");
    check_swap_seen(a, other_vendor(a, 148 - 128, 196 - 128, 3), 3);
  }
  SECTION("CMIS QSFP-DD: vendor name bytes 129-144, serial 166-181 of page 00h, thresholds page 02h") {
    auto a = load_pages("qsfpdd_dr4_hot");
    check_swap_seen(a, other_vendor(a, 129 - 128, 166 - 128, 2), 2);
  }
}
