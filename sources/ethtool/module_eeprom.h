// Transceiver module EEPROM: the pages a QSFP28 (SFF-8636) or QSFP-DD/OSFP (CMIS 4/5) module
// exposes at I2C address 0x50, and an SFP's (SFF-8472) A0h page at 0x50 with its diagnostics
// page A2h at 0x51, read page by page over ethtool netlink
// (ETHTOOL_MSG_MODULE_EEPROM_GET, kernels >= 5.13), and a pure decoder of those pages into the
// module's identity, its monitors in base units (celsius, volts, amperes, watts), its own
// alarm/warning thresholds and its flags (alarms, warnings, LOS, Tx fault, CDR loss of lock).
//
// Reading is two steps because the lower page says what else exists: read_plan() takes the lower
// page and names the upper pages the decoder uses (SFF-8636: 00h, and 03h unless the memory is
// flat; CMIS: 00h, and 01h, 02h, 11h of bank 0 unless flat; SFF-8472: A2h when byte 92 says the
// module has digital diagnostics), and bank_plan() takes CMIS page 01h and names page 11h of
// every further bank it advertises (byte 142: lanes 9-16 in bank 1, up to 32 lanes in banks
// 0-3), so a module is asked for at most eight 128-byte pages. The byte offsets are those of
// SFF-8636 rev 2.10a, CMIS 5.0 and SFF-8472 rev 12.4 (the same as ethtool's qsfp.h, cmis.h and
// sfpdiag.c), and every read is bounds-checked: a page shorter than 128 bytes, or missing, only
// leaves the fields it would hold unset.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/genetlink.h"

namespace rdma::ethtool {

constexpr std::size_t kModulePageLength = 128;
constexpr std::uint8_t kModuleI2cAddress = 0x50;
constexpr std::uint8_t kSff8472DiagnosticsI2cAddress = 0x51;  // SFF-8472 A2h
constexpr unsigned kCmisMaxBanks = 4;                          // CMIS 5.x: banks 0-3, 8 lanes each

// One read: `length` bytes from `offset` (0-127: the lower page, 128-255: the upper page `page`
// of `bank`) at `i2c_address`, as ETHTOOL_MSG_MODULE_EEPROM_GET takes it.
struct PageRequest {
  std::uint32_t offset = 0;
  std::uint32_t length = kModulePageLength;
  std::uint8_t page = 0;
  std::uint8_t bank = 0;
  std::uint8_t i2c_address = kModuleI2cAddress;
  bool operator==(const PageRequest&) const = default;
};

// The bytes read: the lower page and the upper pages by (bank, page), each normally 128 bytes
// (upper page bytes are stored from offset 128, i.e. index 0 is byte 128).
struct ModuleMemory {
  std::vector<std::uint8_t> lower;
  std::map<std::pair<std::uint8_t, std::uint8_t>, std::vector<std::uint8_t>> upper;  // (bank, page)
  std::vector<std::uint8_t> diagnostics;  // SFF-8472 A2h bytes 0-127 (I2C 0x51): empty when not read
};

enum class ModuleSpec : std::uint8_t { kUnknown, kSff8636, kCmis, kSff8472 };
std::string_view module_spec_label(ModuleSpec s);  // "sff8636", "cmis", "sff8472", "unknown"

// SFF-8024 identifier (byte 0) -> the management spec it implies and a name ("QSFP28").
ModuleSpec spec_of_identifier(std::uint8_t id);
std::string identifier_name(std::uint8_t id);

// Whether a page changes while the module is plugged (monitors, flags): the lower page, CMIS
// page 11h of every bank and SFF-8472 A2h. The others hold identity, advertisements and thresholds.
bool is_dynamic_page(ModuleSpec spec, const PageRequest& r);

// What the lower page says to read next (nothing for an unknown identifier or a short page).
std::vector<PageRequest> read_plan(std::span<const std::uint8_t> lower);
// The second step for CMIS: page 11h of banks 1.. that page 01h byte 142 advertises (nothing for
// another spec, a flat module, a bank-0-only module or a missing page 01h).
std::vector<PageRequest> bank_plan(const ModuleMemory& memory);

struct AlarmFlags {
  bool high_alarm = false, low_alarm = false, high_warning = false, low_warning = false;
  bool any() const { return high_alarm || low_alarm || high_warning || low_warning; }
};

// A monitor's thresholds as the module advertises them (its own limits, in base units).
struct Thresholds {
  double high_alarm = 0, low_alarm = 0, high_warning = 0, low_warning = 0;
};

struct LaneMonitors {
  unsigned lane = 0;  // 1-based, as the specs and ethtool number them
  std::optional<double> tx_bias_amperes, tx_power_watts, rx_power_watts;
  AlarmFlags tx_bias_flags, tx_power_flags, rx_power_flags;
  // Latched status flags; unset where the spec or the memory has none.
  std::optional<bool> rx_los, tx_los, tx_fault, rx_cdr_lol, tx_cdr_lol;
};

struct ModuleInfo {
  ModuleSpec spec = ModuleSpec::kUnknown;
  std::uint8_t identifier = 0;
  std::string identifier_name;  // "QSFP28", "QSFP-DD", "OSFP", "0x03" for one not decoded here
  std::string spec_revision;    // CMIS "5.0"; SFF-8636/SFF-8472 the compliance code ("0x08")
  std::string vendor, part_number, serial, revision;
  bool flat_memory = false;  // no upper pages beyond 00h: passive copper, no monitors
  bool externally_calibrated = false;  // SFF-8472: readings converted with the A2h constants (§9.3)
  std::optional<double> temperature_celsius, supply_volts;
  AlarmFlags temperature_flags, voltage_flags;
  // Present where the threshold page was read (SFF-8636 page 03h, CMIS page 02h, SFF-8472 A2h).
  std::optional<Thresholds> temperature_thresholds, voltage_thresholds, tx_bias_thresholds, tx_power_thresholds,
      rx_power_thresholds;
  std::vector<LaneMonitors> lanes;
};

// Pure: the module's memory -> what it says. kMalformed when the lower page is shorter than 128
// bytes or names a spec that is not SFF-8636 or CMIS (kNotSupported then, with `identifier` set
// in a returned value: use decode_identifier for the name of such a module).
Result<ModuleInfo> decode_module(const ModuleMemory& memory);

// Pure: the DATA attribute of an ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY.
Result<std::vector<std::uint8_t>> decode_eeprom_reply(std::span<const std::uint8_t> msg);

std::vector<std::uint8_t> build_eeprom_get(std::uint16_t family_id, const std::string& ifname, const PageRequest& r);

// Page 00h (upper, bank 0) of SFF-8636 and CMIS: the module's identity (vendor name, OUI, part
// number, revision, serial number, date code; SFF-8636 rev 2.10a bytes 148-220, CMIS 5.0 bytes
// 129-222) and nothing that changes while it is plugged. SFF-8472 has its identity in the lower
// page (A0h bytes 20-83), which is read every time.
bool is_identity_page(const PageRequest& r);

// One page read, as ModuleEepromReader::read does it for a netdev.
using PageReader = std::function<Result<std::vector<std::uint8_t>>(const PageRequest&)>;
// The lower page, then the pages read_plan() and bank_plan() name; a failing upper page only drops
// its fields. `cached`: an earlier read of the same cage, whose static pages (thresholds,
// advertisements) are taken again when it held the same module: the same identifier and the
// same identity page, read again each time (one 128-byte read), so that a module swapped for
// another of the same type is read in full at the next scrape. The dynamic pages (the lower page,
// CMIS 11h, SFF-8472 A2h) are read every time.
Result<ModuleMemory> read_module_pages(const PageReader& read, const ModuleMemory* cached);

// Reads module memory of netdevs by name over the caller's "ethtool" client (kGenlFamily), which
// outlives it. A netdev without a module EEPROM (veth, a driver without get_module_eeprom*)
// answers EOPNOTSUPP (kNotSupported); an empty cage typically EIO or ENODEV.
class ModuleEepromReader {
 public:
  explicit ModuleEepromReader(netlink::GenlClient& ethtool) : client_(ethtool) {}
  Result<std::vector<std::uint8_t>> read(const std::string& ifname, const PageRequest& r);
  // read_module_pages() over this netdev's pages.
  Result<ModuleMemory> read_module(const std::string& ifname, const ModuleMemory* cached = nullptr);
  // Requests on the client (shared: every reader's of it).
  std::uint64_t requests() const { return client_.requests(); }

 private:
  netlink::GenlClient& client_;
};

}  // namespace rdma::ethtool
