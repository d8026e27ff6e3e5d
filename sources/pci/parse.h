// Parsers for the PCI attributes of sysfs (drivers/pci/pci-sysfs.c, drivers/pci/pcie/aer.c) and
// for PCI config space. Pure functions over bytes: no I/O, unit-tested and fuzzed directly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::pci {

// current_link_speed / max_link_speed: "%s\n" of pci_speed_string(): "2.5 GT/s PCIe" ...
// "64.0 GT/s PCIe" since 5.5; "2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s" before; "Unknown" (or
// "Unknown speed" before 5.5) when the link is down or the speed field is reserved.
// The speed in tenths of GT/s (exact: 25 for 2.5 GT/s); nullopt for Unknown and for malformed
// text (is_unknown_speed() tells them apart).
std::optional<std::uint32_t> parse_link_speed(std::string_view raw);
bool is_unknown_speed(std::string_view raw);

// current_link_width / max_link_width: "%u\n" (0 while the link is down). 0..32 accepted.
std::optional<std::uint32_t> parse_link_width(std::string_view raw);

// numa_node: "%d\n", -1 when the platform gives none. -1..4095 accepted.
std::optional<int> parse_numa_node(std::string_view raw);

// Data rate of one lane after line encoding, in bytes per second: 8b/10b up to 5 GT/s, 128b/130b
// from 8 GT/s (64 GT/s FLIT mode's overhead is not counted: 1:1).
double lane_bytes_per_second(std::uint32_t tenths_gts);

// aer_dev_correctable / aer_dev_nonfatal / aer_dev_fatal (aer_stats_dev_attr() of
// drivers/pci/pcie/aer.c, since 4.19): one "%s %llu\n" line per bit the kernel names, in bit
// order, then "TOTAL_ERR_COR %llu" / "TOTAL_ERR_NONFATAL" / "TOTAL_ERR_FATAL" (errors reported,
// each of which may set several bits); a bit the kernel has no name for is printed only when its
// count is not 0, as "dev_cor_errs_bit[%d]" / "dev_nonfatal_errs_bit[%d]" / "dev_fatal_errs_bit[%d]".
// The names are those of aer_correctable_error_string[] / aer_uncorrectable_error_string[], which
// the kernel has printed in two spellings (kAerBitNames): the long ones the files came with in
// 4.19 ("Receiver Error", "Bad TLP", "RELAY_NUM Rollover", ...; RHEL 8's 4.18 has them by
// backport) and the short ones lspci uses ("RxErr", "BadTLP", "Rollover", ...), which replaced
// them in 2019. Both are read and named by the short one, so that a series keeps its name across
// a kernel upgrade; a name in neither table keeps its printed name.
struct AerCounter {
  std::string name;  // the short name of the bit; "bit<N>" for an unnamed bit; else the name as printed
  std::uint64_t count = 0;
  int bit = -1;      // the bit of the AER status register, -1 for a name not in kAerBitNames
};
struct AerCounters {
  std::vector<AerCounter> types;  // in the file's order, TOTAL_* excluded
  std::optional<std::uint64_t> total;  // unset where the file has no TOTAL_* line
};
inline constexpr std::size_t kMaxAerTypes = 64;  // the kernel has 32 bit positions per register
inline constexpr std::size_t kMaxAerNameLength = 40;  // "Uncorrectable Internal Error" is 28
// One named bit of a register: its short (current) and long (4.19) kernel name.
struct AerBitName {
  bool correctable;  // Correctable Error Status register; else Uncorrectable Error Status
  int bit;
  const char* short_name;
  const char* long_name;  // nullptr: a bit named only after the names were shortened
};
extern const std::vector<AerBitName> kAerBitNames;
// The bit a printed name stands for (short or long spelling), nullptr for an unknown name.
const AerBitName* aer_bit_name(std::string_view printed);
std::optional<AerCounters> parse_aer(std::string_view raw);
// The TOTAL_* line alone (a bridge's reports), without keeping the per-type counters.
std::optional<std::uint64_t> parse_aer_total(std::string_view raw);

// "DDDD:BB:DD.F" in lower-case hex, as the kernel names a PCI function's directory.
bool is_bdf(std::string_view s);
// "pciDDDD:BB": a host bridge's directory under /sys/devices.
bool is_host_bridge(std::string_view s);

// The PCI Express Access Control Services extended capability (cap ID 0x000D) found by walking
// the extended capability list from offset 0x100 of config space. A reader without
// CAP_SYS_ADMIN gets only the first 64 bytes of the `config` file: kUnreadable, which is state.
struct Acs {
  enum class State : std::uint8_t { kUnreadable, kAbsent, kPresent };
  State state = State::kUnreadable;
  std::uint16_t offset = 0;
  std::uint16_t capability = 0;  // ACS Capability Register (offset + 4)
  std::uint16_t control = 0;     // ACS Control Register (offset + 6)
  // Request Redirect (bit 2), Completion Redirect (bit 3) or Egress Control (bit 5): peer-to-peer
  // requests between the ports below are sent up to the root complex (or blocked) instead of
  // being routed inside the switch. Source Validation and Translation Blocking do not re-route.
  static constexpr std::uint16_t kP2pRedirectBits = (1u << 2) | (1u << 3) | (1u << 5);
  bool redirects_p2p() const { return state == State::kPresent && (control & kP2pRedirectBits) != 0; }
};
inline constexpr std::uint16_t kAcsCapabilityId = 0x000D;
inline constexpr std::size_t kConfigSpaceSize = 4096;   // PCI Express extended config space
inline constexpr std::size_t kLegacyConfigSize = 256;   // where the extended list starts
Acs find_acs(std::span<const std::uint8_t> config);

}  // namespace rdma::pci
