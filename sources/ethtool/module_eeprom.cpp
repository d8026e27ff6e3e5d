#include "sources/ethtool/module_eeprom.h"

#include <fmt/format.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include "sources/netlink/genetlink.h"

namespace rdma::ethtool {
namespace {

using Bytes = std::span<const std::uint8_t>;

// Units of the monitors, common to SFF-8636 and CMIS (SFF-8636 rev 2.10a section 6.2.4, CMIS 5.0
// section 8.2.5 and 8.9.4): temperature 1/256 degC (signed), supply 100 uV, bias 2 uA (times the
// CMIS multiplier), optical power 0.1 uW.
constexpr double kCelsiusPerLsb = 1.0 / 256.0;
constexpr double kVoltsPerLsb = 100e-6;
constexpr double kAmperesPerLsb = 2e-6;
constexpr double kWattsPerLsb = 0.1e-6;

// A view of one 128-byte page, indexed by the byte address the specs use (0-127 for the lower
// page, 128-255 for an upper page); any byte outside what was read reads as absent.
class Page {
 public:
  Page() = default;
  Page(const std::vector<std::uint8_t>* bytes, unsigned base) : bytes_(bytes), base_(base) {}
  bool present() const { return bytes_ != nullptr && bytes_->size() >= kModulePageLength; }
  std::optional<std::uint8_t> u8(unsigned addr) const {
    if (!bytes_ || addr < base_ || addr - base_ >= bytes_->size()) return std::nullopt;
    return (*bytes_)[addr - base_];
  }
  std::optional<std::uint16_t> u16(unsigned addr) const {  // big-endian, as every SFF field
    auto hi = u8(addr), lo = u8(addr + 1);
    if (!hi || !lo) return std::nullopt;
    return static_cast<std::uint16_t>(*hi << 8 | *lo);
  }
  std::optional<double> s16(unsigned addr, double scale) const {
    auto v = u16(addr);
    if (!v) return std::nullopt;
    return static_cast<std::int16_t>(*v) * scale;
  }
  std::optional<double> scaled(unsigned addr, double scale) const {
    auto v = u16(addr);
    if (!v) return std::nullopt;
    return *v * scale;
  }
  bool bit(unsigned addr, unsigned bit) const {
    auto v = u8(addr);
    return v && (*v >> bit & 1u);
  }
  std::optional<bool> opt_bit(unsigned addr, unsigned bit) const {
    auto v = u8(addr);
    if (!v) return std::nullopt;
    return (*v >> bit & 1u) != 0;
  }
  // A space-padded ASCII field; bytes outside printable ASCII become '?' (label values are UTF-8).
  std::string ascii(unsigned first, unsigned last) const {
    std::string s;
    for (unsigned a = first; a <= last; ++a) {
      auto c = u8(a);
      if (!c) break;
      s.push_back(*c >= 0x20 && *c < 0x7f ? static_cast<char>(*c) : '?');
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '?')) s.pop_back();
    return s;
  }

 private:
  const std::vector<std::uint8_t>* bytes_ = nullptr;
  unsigned base_ = 0;
};

Page lower_page(const ModuleMemory& m) { return Page(&m.lower, 0); }
Page upper_page(const ModuleMemory& m, std::uint8_t bank, std::uint8_t page) {
  auto it = m.upper.find({bank, page});
  return it == m.upper.end() ? Page() : Page(&it->second, 128);
}

// Four threshold values in the order both specs keep them: high alarm, low alarm, high warning,
// low warning, each 16 bits from `addr`.
std::optional<Thresholds> thresholds(const Page& p, unsigned addr, double scale, bool is_signed) {
  auto v = [&](unsigned a) { return is_signed ? p.s16(a, scale) : p.scaled(a, scale); };
  auto ha = v(addr), la = v(addr + 2), hw = v(addr + 4), lw = v(addr + 6);
  if (!p.present() || !ha || !la || !hw || !lw) return std::nullopt;
  return Thresholds{*ha, *la, *hw, *lw};
}

// SFF-8636 and CMIS module flags: high alarm, low alarm, high warning, low warning at `first`,
// first-1, first-2, first-3 (bits 7..4 or 3..0 of one byte).
AlarmFlags flags4(const Page& p, unsigned addr, unsigned first_bit) {
  return {p.bit(addr, first_bit), p.bit(addr, first_bit - 1), p.bit(addr, first_bit - 2), p.bit(addr, first_bit - 3)};
}

// ---- SFF-8636 (QSFP+, QSFP28): 4 lanes, monitors in the lower page, thresholds in page 03h ----
namespace sff8636 {
constexpr unsigned kStatus2 = 0x02, kFlatMem = 2;
constexpr unsigned kLos = 0x03, kFault = 0x04, kLol = 0x05;
constexpr unsigned kTempFlags = 0x06, kVccFlags = 0x07;
constexpr unsigned kRxPowerFlags = 0x09, kTxBiasFlags = 0x0B, kTxPowerFlags = 0x0D;
constexpr unsigned kTemp = 0x16, kVcc = 0x1A, kRxPower = 0x22, kTxBias = 0x2A, kTxPower = 0x32;
constexpr unsigned kVendorName = 0x94, kPartNumber = 0xA8, kRevision = 0xB8, kSerial = 0xC4;
constexpr unsigned kDiagType = 0xDC;  // bit 5 temperature, 4 voltage, 2 Tx power monitored
constexpr unsigned kTempThr = 0x80, kVccThr = 0x90, kRxPowerThr = 0xB0, kTxBiasThr = 0xB8, kTxPowerThr = 0xC0;
constexpr unsigned kLanes = 4;

void decode(const ModuleMemory& m, ModuleInfo& out) {
  const Page lo = lower_page(m), p0 = upper_page(m, 0, 0), p3 = upper_page(m, 0, 3);
  out.spec_revision = fmt::format("0x{:02x}", lo.u8(0x01).value_or(0));
  out.flat_memory = lo.bit(kStatus2, kFlatMem);
  out.vendor = p0.ascii(kVendorName, kVendorName + 15);
  out.part_number = p0.ascii(kPartNumber, kPartNumber + 15);
  out.revision = p0.ascii(kRevision, kRevision + 1);
  out.serial = p0.ascii(kSerial, kSerial + 15);
  // Without page 00h the diagnostic type is unknown: take the monitors as the lower page has them.
  const bool diag_known = p0.present();
  if (!diag_known || p0.bit(kDiagType, 5)) out.temperature_celsius = lo.s16(kTemp, kCelsiusPerLsb);
  if (!diag_known || p0.bit(kDiagType, 4)) out.supply_volts = lo.scaled(kVcc, kVoltsPerLsb);
  const bool tx_power = !diag_known || p0.bit(kDiagType, 2);
  out.temperature_flags = flags4(lo, kTempFlags, 7);
  out.voltage_flags = flags4(lo, kVccFlags, 7);
  if (!out.flat_memory) {
    out.temperature_thresholds = thresholds(p3, kTempThr, kCelsiusPerLsb, true);
    out.voltage_thresholds = thresholds(p3, kVccThr, kVoltsPerLsb, false);
    out.rx_power_thresholds = thresholds(p3, kRxPowerThr, kWattsPerLsb, false);
    out.tx_bias_thresholds = thresholds(p3, kTxBiasThr, kAmperesPerLsb, false);
    if (tx_power) out.tx_power_thresholds = thresholds(p3, kTxPowerThr, kWattsPerLsb, false);
  }
  // A flat-memory module (passive copper) has no lane monitors or lane flags worth reporting.
  if (out.flat_memory) return;
  for (unsigned i = 0; i < kLanes; ++i) {
    LaneMonitors l;
    l.lane = i + 1;
    l.rx_power_watts = lo.scaled(kRxPower + 2 * i, kWattsPerLsb);
    l.tx_bias_amperes = lo.scaled(kTxBias + 2 * i, kAmperesPerLsb);
    if (tx_power) l.tx_power_watts = lo.scaled(kTxPower + 2 * i, kWattsPerLsb);
    // Two lanes per flag byte: lane 1 in bits 7-4, lane 2 in bits 3-0, lanes 3-4 in the next byte.
    const unsigned byte = i / 2, first = i % 2 == 0 ? 7 : 3;
    l.rx_power_flags = flags4(lo, kRxPowerFlags + byte, first);
    l.tx_bias_flags = flags4(lo, kTxBiasFlags + byte, first);
    l.tx_power_flags = flags4(lo, kTxPowerFlags + byte, first);
    l.rx_los = lo.opt_bit(kLos, i);
    l.tx_los = lo.opt_bit(kLos, 4 + i);
    l.tx_fault = lo.opt_bit(kFault, i);
    l.rx_cdr_lol = lo.opt_bit(kLol, i);
    l.tx_cdr_lol = lo.opt_bit(kLol, 4 + i);
    out.lanes.push_back(l);
  }
}
}  // namespace sff8636

// ---- CMIS 4.0/5.x (QSFP-DD, OSFP, QSFP+ CMIS): up to 8 lanes per bank; bank 0 is read ----
namespace cmis {
constexpr unsigned kMemoryModel = 0x02, kFlatBit = 7;
constexpr unsigned kModuleFlags = 0x09;  // bits 7-4 Vcc low/high warn/alarm, 3-0 temperature
constexpr unsigned kTemp = 0x0E, kVcc = 0x10;
constexpr unsigned kFirstApplication = 0x56;  // its byte 2 (0x58): host lanes 7-4, media lanes 3-0
constexpr unsigned kVendorName = 0x81, kPartNumber = 0x94, kRevision = 0xA4, kSerial = 0xA6;
// Page 01h advertisements.
constexpr unsigned kModuleMonitors = 0x9F;  // bit 0 temperature, bit 1 supply voltage
constexpr unsigned kLaneMonitors = 0xA0;    // bit 0 Tx bias, 1 Tx power, 2 Rx power; 4-3 bias multiplier
// Page 02h thresholds.
constexpr unsigned kTempThr = 0x80, kVccThr = 0x88, kTxPowerThr = 0xB0, kTxBiasThr = 0xB8, kRxPowerThr = 0xC0;
// Page 11h lane flags (one bit per lane) and monitors.
constexpr unsigned kTxFault = 0x87, kTxLos = 0x88, kTxLol = 0x89;
constexpr unsigned kTxPowerFlags = 0x8B, kTxBiasFlags = 0x8F, kRxLos = 0x93, kRxLol = 0x94, kRxPowerFlags = 0x95;
constexpr unsigned kTxPower = 0x9A, kTxBias = 0xAA, kRxPower = 0xBA;
constexpr unsigned kLanesPerBank = 8;

// CMIS keeps its module flags low-first: bit 0 high alarm, 1 low alarm, 2 high warning, 3 low
// warning (CMIS 5.0 Table 8-9), for temperature in bits 3-0 and for Vcc in bits 7-4.
AlarmFlags module_flags(const Page& lo, unsigned shift) {
  return {lo.bit(kModuleFlags, shift), lo.bit(kModuleFlags, shift + 1), lo.bit(kModuleFlags, shift + 2),
          lo.bit(kModuleFlags, shift + 3)};
}
// One flag byte per kind and per alarm, one bit per lane (bit 0 = lane 1).
AlarmFlags lane_flags(const Page& p11, unsigned first, unsigned i) {
  return {p11.bit(first, i), p11.bit(first + 1, i), p11.bit(first + 2, i), p11.bit(first + 3, i)};
}

void decode(const ModuleMemory& m, ModuleInfo& out) {
  const Page lo = lower_page(m), p0 = upper_page(m, 0, 0), p1 = upper_page(m, 0, 1), p2 = upper_page(m, 0, 2),
             p11 = upper_page(m, 0, 0x11);
  const std::uint8_t rev = lo.u8(0x01).value_or(0);
  out.spec_revision = fmt::format("{}.{}", rev >> 4, rev & 0x0f);
  out.flat_memory = lo.bit(kMemoryModel, kFlatBit);
  out.vendor = p0.ascii(kVendorName, kVendorName + 15);
  out.part_number = p0.ascii(kPartNumber, kPartNumber + 15);
  out.revision = p0.ascii(kRevision, kRevision + 1);
  out.serial = p0.ascii(kSerial, kSerial + 15);
  if (out.flat_memory) return;  // passive copper: page 00h only, no monitors
  // Page 01h advertises the monitors; without it, take the module-level ones as present.
  if (!p1.present() || p1.bit(kModuleMonitors, 0)) out.temperature_celsius = lo.s16(kTemp, kCelsiusPerLsb);
  if (!p1.present() || p1.bit(kModuleMonitors, 1)) out.supply_volts = lo.scaled(kVcc, kVoltsPerLsb);
  out.temperature_flags = module_flags(lo, 0);
  out.voltage_flags = module_flags(lo, 4);
  out.temperature_thresholds = thresholds(p2, kTempThr, kCelsiusPerLsb, true);
  out.voltage_thresholds = thresholds(p2, kVccThr, kVoltsPerLsb, false);
  if (!p1.present() || !p11.present()) return;  // the lanes need both the advertisement and page 11h
  const std::uint8_t adv = p1.u8(kLaneMonitors).value_or(0);
  const bool bias = adv & 0x01, txp = adv & 0x02, rxp = adv & 0x04;
  const double bias_scale = kAmperesPerLsb * (1u << ((adv >> 3) & 0x03));  // x1, x2, x4
  if (txp) out.tx_power_thresholds = thresholds(p2, kTxPowerThr, kWattsPerLsb, false);
  if (bias) out.tx_bias_thresholds = thresholds(p2, kTxBiasThr, bias_scale, false);
  if (rxp) out.rx_power_thresholds = thresholds(p2, kRxPowerThr, kWattsPerLsb, false);
  unsigned lanes = lo.u8(kFirstApplication + 2).value_or(0) & 0x0f;  // media lanes of application 1
  if (lanes == 0 || lanes > kLanesPerBank) lanes = kLanesPerBank;
  for (unsigned i = 0; i < lanes; ++i) {
    LaneMonitors l;
    l.lane = i + 1;
    if (bias) l.tx_bias_amperes = p11.scaled(kTxBias + 2 * i, bias_scale);
    if (txp) l.tx_power_watts = p11.scaled(kTxPower + 2 * i, kWattsPerLsb);
    if (rxp) l.rx_power_watts = p11.scaled(kRxPower + 2 * i, kWattsPerLsb);
    if (bias) l.tx_bias_flags = lane_flags(p11, kTxBiasFlags, i);
    if (txp) l.tx_power_flags = lane_flags(p11, kTxPowerFlags, i);
    if (rxp) l.rx_power_flags = lane_flags(p11, kRxPowerFlags, i);
    l.tx_fault = p11.opt_bit(kTxFault, i);
    l.tx_los = p11.opt_bit(kTxLos, i);
    l.tx_cdr_lol = p11.opt_bit(kTxLol, i);
    l.rx_los = p11.opt_bit(kRxLos, i);
    l.rx_cdr_lol = p11.opt_bit(kRxLol, i);
    out.lanes.push_back(l);
  }
}
}  // namespace cmis

}  // namespace

std::string_view module_spec_label(ModuleSpec s) {
  switch (s) {
    case ModuleSpec::kSff8636: return "sff8636";
    case ModuleSpec::kCmis: return "cmis";
    default: return "unknown";
  }
}

ModuleSpec spec_of_identifier(std::uint8_t id) {
  switch (id) {
    case 0x0C: case 0x0D: case 0x11: return ModuleSpec::kSff8636;  // QSFP, QSFP+, QSFP28
    case 0x18: case 0x19: case 0x1E: return ModuleSpec::kCmis;     // QSFP-DD, OSFP, QSFP+ (CMIS)
    default: return ModuleSpec::kUnknown;
  }
}

std::string identifier_name(std::uint8_t id) {
  // SFF-8024 rev 4.11 Table 4-1, the module types an RDMA NIC takes.
  switch (id) {
    case 0x03: return "SFP";
    case 0x0C: return "QSFP";
    case 0x0D: return "QSFP+";
    case 0x11: return "QSFP28";
    case 0x18: return "QSFP-DD";
    case 0x19: return "OSFP";
    case 0x1E: return "QSFP+ CMIS";
    default: return fmt::format("0x{:02x}", id);
  }
}

bool is_dynamic_page(ModuleSpec spec, const PageRequest& r) {
  return r.offset < kModulePageLength || (spec == ModuleSpec::kCmis && r.page == 0x11);
}

std::vector<PageRequest> read_plan(std::span<const std::uint8_t> lower) {
  if (lower.size() < kModulePageLength) return {};
  const PageRequest page0{.offset = 128, .page = 0};
  switch (spec_of_identifier(lower[0])) {
    case ModuleSpec::kSff8636:
      if (lower[sff8636::kStatus2] >> sff8636::kFlatMem & 1u) return {page0};
      return {page0, {.offset = 128, .page = 3}};
    case ModuleSpec::kCmis:
      if (lower[cmis::kMemoryModel] >> cmis::kFlatBit & 1u) return {page0};
      return {page0, {.offset = 128, .page = 1}, {.offset = 128, .page = 2}, {.offset = 128, .page = 0x11}};
    default: return {};
  }
}

Result<ModuleInfo> decode_module(const ModuleMemory& memory) {
  using R = Result<ModuleInfo>;
  if (memory.lower.size() < kModulePageLength) return R::failure(ReadError::kMalformed);
  ModuleInfo out;
  out.identifier = memory.lower[0];
  out.identifier_name = identifier_name(out.identifier);
  out.spec = spec_of_identifier(out.identifier);
  switch (out.spec) {
    case ModuleSpec::kSff8636: sff8636::decode(memory, out); break;
    case ModuleSpec::kCmis: cmis::decode(memory, out); break;
    default: return R{out, ReadError::kNotSupported, 0};
  }
  return R::success(std::move(out));
}

Result<std::vector<std::uint8_t>> decode_eeprom_reply(std::span<const std::uint8_t> msg) {
  using R = Result<std::vector<std::uint8_t>>;
  auto reply = netlink::single_reply(msg);
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  std::optional<std::vector<std::uint8_t>> data;
  const bool ok = netlink::for_each_attr(reply.value, sizeof(genlmsghdr), [&](std::uint16_t type, netlink::Bytes v) {
    if (type == ETHTOOL_A_MODULE_EEPROM_DATA) data.emplace(v.begin(), v.end());
  });
  if (!ok || !data) return R::failure(ReadError::kMalformed);
  return R::success(std::move(*data));
}

std::vector<std::uint8_t> build_eeprom_get(std::uint16_t family_id, const std::string& ifname, const PageRequest& r) {
  return netlink::build_genl_request(family_id, ETHTOOL_MSG_MODULE_EEPROM_GET, ETHTOOL_GENL_VERSION, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, ETHTOOL_A_MODULE_EEPROM_HEADER);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    mnl_attr_nest_end(nlh, hdr);
    mnl_attr_put_u32(nlh, ETHTOOL_A_MODULE_EEPROM_OFFSET, r.offset);
    mnl_attr_put_u32(nlh, ETHTOOL_A_MODULE_EEPROM_LENGTH, r.length);
    mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_PAGE, r.page);
    mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_BANK, r.bank);
    mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS, kModuleI2cAddress);
  });
}

ModuleEepromReader::ModuleEepromReader(std::chrono::milliseconds receive_timeout)
    : sock_(NETLINK_GENERIC, receive_timeout) {}

Result<std::vector<std::uint8_t>> ModuleEepromReader::read(const std::string& ifname, const PageRequest& r) {
  using R = Result<std::vector<std::uint8_t>>;
  if (family_ == 0) {
    auto id = netlink::resolve_family(sock_, ETHTOOL_GENL_NAME);
    if (!id) return R::failure(id.error, id.sys_errno);
    family_ = id.value;
  }
  auto reply = sock_.request(build_eeprom_get(family_, ifname, r));
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  return decode_eeprom_reply(reply.value);
}

Result<ModuleMemory> ModuleEepromReader::read_module(const std::string& ifname, const ModuleMemory* cached) {
  using R = Result<ModuleMemory>;
  ModuleMemory m;
  auto lower = read(ifname, PageRequest{});
  if (!lower) return R::failure(lower.error, lower.sys_errno);
  m.lower = std::move(lower.value);
  const bool same_module = cached && !cached->lower.empty() && !m.lower.empty() && cached->lower[0] == m.lower[0];
  const ModuleSpec spec = m.lower.empty() ? ModuleSpec::kUnknown : spec_of_identifier(m.lower[0]);
  for (const auto& req : read_plan(m.lower)) {
    if (same_module && !is_dynamic_page(spec, req)) {
      if (auto it = cached->upper.find({req.bank, req.page}); it != cached->upper.end()) {
        m.upper.insert(*it);
        continue;
      }
    }
    // An optional page the module lacks is refused (EINVAL/EIO): its fields stay unset.
    auto page = read(ifname, req);
    if (page) m.upper[{req.bank, req.page}] = std::move(page.value);
  }
  return R::success(std::move(m));
}

}  // namespace rdma::ethtool
