// Module EEPROM: the SFF-8636 and CMIS decoder on page sets (data/*.pages, built by
// make_pages.py at the specs' addresses) against what ethtool's own decoder prints for the same
// pages (data/*.ethtool-m.txt: ethtool 5.19's `ethtool -m` netlink path, qsfp.c/cmis.c, fed the
// pages through its nl_get_eeprom_page(); see data/README.md), the read plan, the netlink codec
// in the kernel's layout, and robustness on cut and mutated pages.
#include <catch2/catch.hpp>

#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "sources/ethtool/module_eeprom.h"
#include "sources/netlink/genetlink.h"

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
    unsigned bank = 0, page = 0, offset = 0;
    if (std::sscanf(line.c_str(), "page %u %u %u", &bank, &page, &offset) == 3) {
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
  CHECK(plan(0x03, 0x00).empty());  // SFP (SFF-8472): not decoded here
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

TEST_CASE("module EEPROM: an SFP is named, not decoded, and a short lower page is malformed", "[unit]") {
  ModuleMemory m;
  m.lower.assign(128, 0);
  m.lower[0] = 0x03;
  auto r = ethtool::decode_module(m);
  CHECK(r.error == ReadError::kNotSupported);
  CHECK(r.value.identifier_name == "SFP");
  m.lower.resize(127);
  CHECK(ethtool::decode_module(m).error == ReadError::kMalformed);
  CHECK(ethtool::identifier_name(0x7f) == "0x7f");
}

TEST_CASE("module EEPROM: cut pages, missing pages and random bytes never crash", "[unit]") {
  for (const char* name : {"qsfp28_sr4_rx_los", "qsfpdd_dr4_hot"}) {
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
      auto r = ethtool::decode_module(m);
      for (const auto& l : r.value.lanes) CHECK((l.lane >= 1 && l.lane <= 8));
    }
  }
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
