#include "sources/ethtool/module_eeprom.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
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
Page diagnostics_page(const ModuleMemory& m) { return Page(&m.diagnostics, 0); }
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

// ---- CMIS 4.0/5.x (QSFP-DD, OSFP, QSFP+ CMIS): 8 lanes per bank, banks 0-3 ----
namespace cmis {
constexpr unsigned kMemoryModel = 0x02, kFlatBit = 7;
constexpr unsigned kModuleFlags = 0x09;  // bits 7-4 Vcc low/high warn/alarm, 3-0 temperature
constexpr unsigned kTemp = 0x0E, kVcc = 0x10;
constexpr unsigned kFirstApplication = 0x56;  // its byte 2 (0x58): host lanes 7-4, media lanes 3-0
constexpr unsigned kVendorName = 0x81, kPartNumber = 0x94, kRevision = 0xA4, kSerial = 0xA6;
// Page 01h advertisements.
constexpr unsigned kPagesAdvertised = 0x8E;  // bits 1-0: banks 0 only, 0-1, 0-3 (CMIS 5.0 Table 8-40)
constexpr unsigned kModuleMonitors = 0x9F;  // bit 0 temperature, bit 1 supply voltage
constexpr unsigned kLaneMonitors = 0xA0;    // bit 0 Tx bias, 1 Tx power, 2 Rx power; 4-3 bias multiplier
// Page 02h thresholds.
constexpr unsigned kTempThr = 0x80, kVccThr = 0x88, kTxPowerThr = 0xB0, kTxBiasThr = 0xB8, kRxPowerThr = 0xC0;
// Page 11h lane flags (one bit per lane) and monitors.
constexpr unsigned kTxFault = 0x87, kTxLos = 0x88, kTxLol = 0x89;
constexpr unsigned kTxPowerFlags = 0x8B, kTxBiasFlags = 0x8F, kRxLos = 0x93, kRxLol = 0x94, kRxPowerFlags = 0x95;
constexpr unsigned kTxPower = 0x9A, kTxBias = 0xAA, kRxPower = 0xBA;
constexpr unsigned kLanesPerBank = 8;

// Banks the module has, from page 01h byte 142 (ethtool cmis.c cmis_num_banks_get()): 1, 2 or 4;
// the reserved code 11b reads as bank 0 only.
unsigned banks(const Page& p1) {
  if (!p1.present()) return 1;
  switch (p1.u8(kPagesAdvertised).value_or(0) & 0x03) {
    case 0x01: return 2;
    case 0x02: return 4;
    default: return 1;
  }
}

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

// The lanes of one bank's page 11h (bits and 16-bit slots indexed by the lane within the bank),
// numbered from `first` + 1.
void decode_lanes(const Page& p11, unsigned first, unsigned lanes, std::uint8_t adv, double bias_scale,
                  ModuleInfo& out) {
  const bool bias = adv & 0x01, txp = adv & 0x02, rxp = adv & 0x04;
  for (unsigned i = 0; i < lanes; ++i) {
    LaneMonitors l;
    l.lane = first + i + 1;
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
  // Media lanes of application 1 in each bank; a bank the module advertises but whose page 11h
  // was not read adds no lanes (bank b holds lanes 8b+1 .. 8b+8, CMIS 5.0 section 8.1.2).
  unsigned lanes = lo.u8(kFirstApplication + 2).value_or(0) & 0x0f;
  if (lanes == 0 || lanes > kLanesPerBank) lanes = kLanesPerBank;
  const unsigned nbanks = banks(p1);
  for (unsigned b = 0; b < nbanks; ++b) {
    const Page bank11 = b == 0 ? p11 : upper_page(m, static_cast<std::uint8_t>(b), 0x11);
    if (!bank11.present()) continue;
    decode_lanes(bank11, b * kLanesPerBank, lanes, adv, bias_scale, out);
  }
}
}  // namespace cmis

// ---- SFF-8472 rev 12.4 (SFP, SFP+, SFP28, SFP56): identity in A0h, diagnostics in A2h ----
namespace sff8472 {
// A0h (I2C 0x50) bytes 0-127.
constexpr unsigned kVendorName = 20, kPartNumber = 40, kRevision = 56, kSerial = 68;
constexpr unsigned kDiagType = 92;  // bit 6 DDM implemented, 5 internally, 4 externally calibrated
constexpr unsigned kDdm = 6, kExternal = 4;
constexpr unsigned kEnhancedOptions = 93;  // bit 7 alarm/warning flags, 5 soft TX_FAULT, 4 soft RX_LOS
constexpr unsigned kCompliance = 94;
// A2h (I2C 0x51) bytes 0-127: thresholds, external calibration constants (section 9.3), monitors
// and flags (Table 9-5 .. 9-16; the same offsets as ethtool's sfpdiag.c).
constexpr unsigned kTempThr = 0, kVccThr = 8, kBiasThr = 16, kTxPowerThr = 24, kRxPowerThr = 32;
constexpr unsigned kRxPwr4 = 56;  // Rx_PWR(4) .. Rx_PWR(0): IEEE-754 single precision, big-endian
constexpr unsigned kTxISlope = 76, kTxPwrSlope = 80, kTSlope = 84, kVSlope = 88;  // each slope, then its offset
constexpr unsigned kTemp = 96, kVcc = 98, kBias = 100, kTxPower = 102, kRxPower = 104;
constexpr unsigned kStatus = 110;  // bit 2 TX_FAULT, bit 1 RX_LOS (real-time state)
constexpr unsigned kAlarmFlags = 112, kWarningFlags = 116;

// How a raw A/D value becomes a value in the unit of its LSB: as it is (internal calibration), or
// slope x raw + offset (external: slope unsigned fixed point 8.8, offset signed, section 9.3
// equation 1), or the Rx power polynomial of the five constants (equation 2). A result that is not
// a finite number (a hostile constant) is no reading.
class Calibration {
 public:
  Calibration(const Page& a2, bool external) : a2_(a2), external_(external) {}
  std::optional<double> linear(std::optional<double> raw, unsigned slope_addr) const {
    if (!raw || !external_) return raw;
    auto slope = a2_.u16(slope_addr), offset = a2_.u16(slope_addr + 2);
    if (!slope || !offset) return std::nullopt;
    return *slope / 256.0 * *raw + static_cast<std::int16_t>(*offset);
  }
  std::optional<double> rx_power(std::optional<double> raw) const {
    if (!raw || !external_) return raw;
    double v = 0;
    for (unsigned k = 0; k < 5; ++k) {  // Rx_PWR(4) first: Horner's rule from the highest power
      auto hi = a2_.u16(kRxPwr4 + 4 * k), lo = a2_.u16(kRxPwr4 + 4 * k + 2);
      if (!hi || !lo) return std::nullopt;
      v = v * *raw + std::bit_cast<float>(static_cast<std::uint32_t>(*hi) << 16 | *lo);
    }
    if (!std::isfinite(v)) return std::nullopt;
    return v;
  }

 private:
  Page a2_;
  bool external_;
};

std::optional<double> scale(std::optional<double> raw_units, double lsb) {
  if (!raw_units) return std::nullopt;
  return *raw_units * lsb;
}

// One monitor's four flags: its alarm bit pair (high, then low) in the alarm byte and the same
// bits in the warning byte.
AlarmFlags flags(const Page& a2, unsigned byte, unsigned high_bit) {
  return {a2.bit(kAlarmFlags + byte, high_bit), a2.bit(kAlarmFlags + byte, high_bit - 1),
          a2.bit(kWarningFlags + byte, high_bit), a2.bit(kWarningFlags + byte, high_bit - 1)};
}

void decode(const ModuleMemory& m, ModuleInfo& out) {
  const Page a0 = lower_page(m), a2 = diagnostics_page(m);
  out.spec_revision = fmt::format("0x{:02x}", a0.u8(kCompliance).value_or(0));
  out.vendor = a0.ascii(kVendorName, kVendorName + 15);
  out.part_number = a0.ascii(kPartNumber, kPartNumber + 15);
  out.revision = a0.ascii(kRevision, kRevision + 3);
  out.serial = a0.ascii(kSerial, kSerial + 15);
  // Without DDM (a passive cable, an old module) or without the A2h page: identity only.
  if (!a0.bit(kDiagType, kDdm) || !a2.present()) return;
  out.externally_calibrated = a0.bit(kDiagType, kExternal);
  const Calibration cal(a2, out.externally_calibrated);
  // Thresholds are calibrated as the readings are (they are in the same A/D units).
  auto level = [&](unsigned addr, bool is_signed, unsigned slope, double lsb) -> std::optional<double> {
    auto raw = is_signed ? a2.s16(addr, 1.0) : a2.scaled(addr, 1.0);
    return scale(slope == kRxPwr4 ? cal.rx_power(raw) : cal.linear(raw, slope), lsb);
  };
  auto thresholds4 = [&](unsigned addr, bool is_signed, unsigned slope, double lsb) -> std::optional<Thresholds> {
    auto ha = level(addr, is_signed, slope, lsb), la = level(addr + 2, is_signed, slope, lsb),
         hw = level(addr + 4, is_signed, slope, lsb), lw = level(addr + 6, is_signed, slope, lsb);
    if (!ha || !la || !hw || !lw) return std::nullopt;
    return Thresholds{*ha, *la, *hw, *lw};
  };
  out.temperature_celsius = level(kTemp, true, kTSlope, kCelsiusPerLsb);
  out.supply_volts = level(kVcc, false, kVSlope, kVoltsPerLsb);
  out.temperature_thresholds = thresholds4(kTempThr, true, kTSlope, kCelsiusPerLsb);
  out.voltage_thresholds = thresholds4(kVccThr, false, kVSlope, kVoltsPerLsb);
  out.tx_bias_thresholds = thresholds4(kBiasThr, false, kTxISlope, kAmperesPerLsb);
  out.tx_power_thresholds = thresholds4(kTxPowerThr, false, kTxPwrSlope, kWattsPerLsb);
  out.rx_power_thresholds = thresholds4(kRxPowerThr, false, kRxPwr4, kWattsPerLsb);
  LaneMonitors l;
  l.lane = 1;
  l.tx_bias_amperes = level(kBias, false, kTxISlope, kAmperesPerLsb);
  l.tx_power_watts = level(kTxPower, false, kTxPwrSlope, kWattsPerLsb);
  l.rx_power_watts = level(kRxPower, false, kRxPwr4, kWattsPerLsb);
  // The flags exist where A0h byte 93 says so (ethtool: "Alarm/warning flags implemented").
  if (a0.bit(kEnhancedOptions, 7)) {
    out.temperature_flags = flags(a2, 0, 7);
    out.voltage_flags = flags(a2, 0, 5);
    l.tx_bias_flags = flags(a2, 0, 3);
    l.tx_power_flags = flags(a2, 0, 1);
    l.rx_power_flags = flags(a2, 1, 7);
  }
  if (a0.bit(kEnhancedOptions, 5)) l.tx_fault = a2.opt_bit(kStatus, 2);
  if (a0.bit(kEnhancedOptions, 4)) l.rx_los = a2.opt_bit(kStatus, 1);
  out.lanes.push_back(l);
}
}  // namespace sff8472

}  // namespace

std::string_view module_spec_label(ModuleSpec s) {
  switch (s) {
    case ModuleSpec::kSff8636: return "sff8636";
    case ModuleSpec::kCmis: return "cmis";
    case ModuleSpec::kSff8472: return "sff8472";
    default: return "unknown";
  }
}

ModuleSpec spec_of_identifier(std::uint8_t id) {
  switch (id) {
    case 0x0C: case 0x0D: case 0x11: return ModuleSpec::kSff8636;  // QSFP, QSFP+, QSFP28
    case 0x18: case 0x19: case 0x1E: return ModuleSpec::kCmis;     // QSFP-DD, OSFP, QSFP+ (CMIS)
    case 0x03: return ModuleSpec::kSff8472;                       // SFP, SFP+, SFP28, SFP56
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
  return r.offset < kModulePageLength || (spec == ModuleSpec::kCmis && r.page == 0x11) ||
         r.i2c_address == kSff8472DiagnosticsI2cAddress;
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
    case ModuleSpec::kSff8472:
      // A2h lower half (thresholds, calibration, monitors, flags) where the module has DDM.
      if (!(lower[sff8472::kDiagType] >> sff8472::kDdm & 1u)) return {};
      return {{.offset = 0, .i2c_address = kSff8472DiagnosticsI2cAddress}};
    default: return {};
  }
}

std::vector<PageRequest> bank_plan(const ModuleMemory& memory) {
  if (memory.lower.size() < kModulePageLength || spec_of_identifier(memory.lower[0]) != ModuleSpec::kCmis ||
      (memory.lower[cmis::kMemoryModel] >> cmis::kFlatBit & 1u))
    return {};
  std::vector<PageRequest> out;
  const unsigned n = cmis::banks(upper_page(memory, 0, 1));
  for (unsigned b = 1; b < n && b < kCmisMaxBanks; ++b)
    out.push_back({.offset = 128, .page = 0x11, .bank = static_cast<std::uint8_t>(b)});
  return out;
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
    case ModuleSpec::kSff8472: sff8472::decode(memory, out); break;
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
    mnl_attr_put_u8(nlh, ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS, r.i2c_address);
  });
}

Result<std::vector<std::uint8_t>> ModuleEepromReader::read(const std::string& ifname, const PageRequest& r) {
  using R = Result<std::vector<std::uint8_t>>;
  auto reply = client_.request([&](std::uint16_t family) { return build_eeprom_get(family, ifname, r); });
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  return decode_eeprom_reply(reply.value);
}

bool is_identity_page(const PageRequest& r) {
  return r.offset >= kModulePageLength && r.page == 0 && r.bank == 0 && r.i2c_address == kModuleI2cAddress;
}

Result<ModuleMemory> read_module_pages(const PageReader& read, const ModuleMemory* cached) {
  using R = Result<ModuleMemory>;
  ModuleMemory m;
  auto lower = read(PageRequest{});
  if (!lower) return R::failure(lower.error, lower.sys_errno);
  m.lower = std::move(lower.value);
  // The same module while the identifier and (once read, it comes first in every plan) the
  // identity page are the ones cached: the identifier alone is the same for every module of a type.
  bool same_module = cached && !cached->lower.empty() && !m.lower.empty() && cached->lower[0] == m.lower[0];
  const ModuleSpec spec = m.lower.empty() ? ModuleSpec::kUnknown : spec_of_identifier(m.lower[0]);
  auto read_pages = [&](const std::vector<PageRequest>& plan) {
    for (const auto& req : plan) {
      const bool identity = is_identity_page(req);
      if (same_module && !identity && !is_dynamic_page(spec, req)) {
        if (auto it = cached->upper.find({req.bank, req.page}); it != cached->upper.end()) {
          m.upper.insert(*it);
          continue;
        }
      }
      // An optional page the module lacks is refused (EINVAL/EIO): its fields stay unset.
      auto page = read(req);
      if (!page) {
        if (identity) same_module = false;
        continue;
      }
      if (identity && same_module) {
        const auto it = cached->upper.find({req.bank, req.page});
        same_module = it != cached->upper.end() && it->second == page.value;
      }
      if (req.i2c_address == kSff8472DiagnosticsI2cAddress)
        m.diagnostics = std::move(page.value);
      else
        m.upper[{req.bank, req.page}] = std::move(page.value);
    }
  };
  read_pages(read_plan(m.lower));
  read_pages(bank_plan(m));  // CMIS: further banks' page 11h, as page 01h advertises them
  return R::success(std::move(m));
}

Result<ModuleMemory> ModuleEepromReader::read_module(const std::string& ifname, const ModuleMemory* cached) {
  return read_module_pages([&](const PageRequest& r) { return read(ifname, r); }, cached);
}

}  // namespace rdma::ethtool
