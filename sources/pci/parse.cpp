#include "sources/pci/parse.h"

#include <charconv>

#include "sources/sysfs/parse.h"

namespace rdma::pci {
namespace {

std::optional<std::uint64_t> digits(std::string_view s, int base = 10) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

bool hex_digits(std::string_view s, std::size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::uint32_t le32(std::span<const std::uint8_t> b, std::size_t off) {
  return std::uint32_t(b[off]) | std::uint32_t(b[off + 1]) << 8 | std::uint32_t(b[off + 2]) << 16 |
         std::uint32_t(b[off + 3]) << 24;
}

}  // namespace

bool is_unknown_speed(std::string_view raw) {
  auto s = sysfs::trim_value(raw);
  return s == "Unknown" || s == "Unknown speed";
}

std::optional<std::uint32_t> parse_link_speed(std::string_view raw) {
  auto s = sysfs::trim_value(raw);
  if (s.ends_with(" PCIe")) s.remove_suffix(5);
  if (!s.ends_with(" GT/s")) return std::nullopt;
  s.remove_suffix(5);
  auto dot = s.find('.');
  auto whole = digits(s.substr(0, dot));
  if (!whole || *whole > 1000) return std::nullopt;
  std::uint32_t tenths = static_cast<std::uint32_t>(*whole) * 10;
  if (dot != std::string_view::npos) {
    auto frac = s.substr(dot + 1);
    if (frac.size() != 1 || frac[0] < '0' || frac[0] > '9') return std::nullopt;
    tenths += static_cast<std::uint32_t>(frac[0] - '0');
  }
  if (tenths == 0) return std::nullopt;
  return tenths;
}

std::optional<std::uint32_t> parse_link_width(std::string_view raw) {
  auto v = digits(sysfs::trim_value(raw));
  if (!v || *v > 32) return std::nullopt;
  return static_cast<std::uint32_t>(*v);
}

std::optional<int> parse_numa_node(std::string_view raw) {
  auto s = sysfs::trim_value(raw);
  if (s == "-1") return -1;
  auto v = digits(s);
  if (!v || *v > 4095) return std::nullopt;
  return static_cast<int>(*v);
}

double lane_bytes_per_second(std::uint32_t tenths_gts) {
  const double transfers = double(tenths_gts) * 1e8;
  const double efficiency = tenths_gts <= 50 ? 8.0 / 10.0 : tenths_gts < 640 ? 128.0 / 130.0 : 1.0;
  return transfers * efficiency / 8.0;
}

// aer_correctable_error_string[] / aer_uncorrectable_error_string[] of drivers/pci/pcie/aer.c:
// the long names as 4.19 added the aer_dev_* files (correctable bits 0-15, uncorrectable 0-25),
// the short ones as the kernel prints them today (torvalds/linux master); uncorrectable bit 26
// "PoisonTLPBlocked" (applied for 5.5) and bits 27-31 (PCIe r6.0's, added in 2025) came after the
// names were shortened and have no long spelling.
const std::vector<AerBitName> kAerBitNames = {
    {true, 0, "RxErr", "Receiver Error"},
    {true, 6, "BadTLP", "Bad TLP"},
    {true, 7, "BadDLLP", "Bad DLLP"},
    {true, 8, "Rollover", "RELAY_NUM Rollover"},
    {true, 12, "Timeout", "Replay Timer Timeout"},
    {true, 13, "NonFatalErr", "Advisory Non-Fatal"},
    {true, 14, "CorrIntErr", "Corrected Internal Error"},
    {true, 15, "HeaderOF", "Header Log Overflow"},
    {false, 0, "Undefined", "Undefined"},
    {false, 4, "DLP", "Data Link Protocol"},
    {false, 5, "SDES", "Surprise Down Error"},
    {false, 12, "TLP", "Poisoned TLP"},
    {false, 13, "FCP", "Flow Control Protocol"},
    {false, 14, "CmpltTO", "Completion Timeout"},
    {false, 15, "CmpltAbrt", "Completer Abort"},
    {false, 16, "UnxCmplt", "Unexpected Completion"},
    {false, 17, "RxOF", "Receiver Overflow"},
    {false, 18, "MalfTLP", "Malformed TLP"},
    {false, 19, "ECRC", "ECRC"},
    {false, 20, "UnsupReq", "Unsupported Request"},
    {false, 21, "ACSViol", "ACS Violation"},
    {false, 22, "UncorrIntErr", "Uncorrectable Internal Error"},
    {false, 23, "BlockedTLP", "MC Blocked TLP"},
    {false, 24, "AtomicOpBlocked", "AtomicOp Egress Blocked"},
    {false, 25, "TLPBlockedErr", "TLP Prefix Blocked Error"},
    {false, 26, "PoisonTLPBlocked", nullptr},
    {false, 27, "DMWrReqBlocked", nullptr},
    {false, 28, "IDECheck", nullptr},
    {false, 29, "MisIDETLP", nullptr},
    {false, 30, "PCRC_CHECK", nullptr},
    {false, 31, "TLPXlatBlocked", nullptr},
};

const AerBitName* aer_bit_name(std::string_view printed) {
  for (const auto& b : kAerBitNames)
    if (printed == b.short_name || (b.long_name && printed == b.long_name)) return &b;
  return nullptr;
}

namespace {

// "dev_cor_errs_bit[9]", "dev_nonfatal_errs_bit[27]", "dev_fatal_errs_bit[31]": the bit's number.
std::optional<int> unnamed_bit(std::string_view name) {
  for (std::string_view prefix : {"dev_cor_errs_bit[", "dev_nonfatal_errs_bit[", "dev_fatal_errs_bit["}) {
    if (!name.starts_with(prefix) || !name.ends_with(']')) continue;
    auto n = digits(name.substr(prefix.size(), name.size() - prefix.size() - 1));
    if (!n || *n > 31) return std::nullopt;
    return static_cast<int>(*n);
  }
  return std::nullopt;
}

}  // namespace

std::optional<AerCounters> parse_aer(std::string_view raw) {
  AerCounters out;
  std::size_t lines = 0;
  std::uint64_t bits_seen = 0;  // bit positions already counted: a bit twice is not the kernel's
  while (!raw.empty()) {
    auto nl = raw.find('\n');
    auto line = raw.substr(0, nl);
    raw = nl == std::string_view::npos ? std::string_view() : raw.substr(nl + 1);
    if (line.empty()) continue;
    if (++lines > kMaxAerTypes + 1) return std::nullopt;
    // "%s %llu": the long names have spaces, so the count is after the last one.
    auto sp = line.rfind(' ');
    if (sp == std::string_view::npos || sp == 0 || sp > kMaxAerNameLength) return std::nullopt;
    auto name = line.substr(0, sp);
    if (name.front() == ' ' || name.back() == ' ') return std::nullopt;
    for (char c : name)
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == ' ' ||
            c == '-' || c == '[' || c == ']'))
        return std::nullopt;
    auto v = digits(line.substr(sp + 1));
    if (!v) return std::nullopt;
    if (name.starts_with("TOTAL_")) {
      if (out.total) return std::nullopt;
      out.total = *v;
      continue;
    }
    if (out.total) return std::nullopt;  // the kernel writes the total last
    AerCounter c{std::string(name), *v, -1};
    if (const auto* b = aer_bit_name(name)) {
      c.name = b->short_name;
      c.bit = b->bit + (b->correctable ? 32 : 0);
    } else if (auto bit = unnamed_bit(name)) {
      c.name = "bit" + std::to_string(*bit);
      c.bit = *bit + (name.starts_with("dev_cor") ? 32 : 0);
    } else if (name.find_first_of("[]") != std::string_view::npos) {
      return std::nullopt;  // brackets only in "<array>_bit[<0-31>]"
    }
    if (c.bit >= 0) {
      if (bits_seen >> c.bit & 1u) return std::nullopt;
      bits_seen |= std::uint64_t{1} << c.bit;
      c.bit %= 32;
    }
    for (const auto& t : out.types)
      if (t.name == c.name) return std::nullopt;
    out.types.push_back(std::move(c));
  }
  if (!out.total && out.types.empty()) return std::nullopt;
  return out;
}

std::optional<std::uint64_t> parse_aer_total(std::string_view raw) {
  const auto t = sysfs::trim_value(raw);
  auto start = t.rfind('\n');
  auto line = start == std::string_view::npos ? t : t.substr(start + 1);
  if (!line.starts_with("TOTAL_")) return std::nullopt;
  auto sp = line.find(' ');
  if (sp == std::string_view::npos || sp > 32) return std::nullopt;
  return digits(line.substr(sp + 1));
}

bool is_bdf(std::string_view s) {
  // DDDD:BB:DD.F
  return s.size() == 12 && hex_digits(s.substr(0, 4), 4) && s[4] == ':' && hex_digits(s.substr(5, 2), 2) && s[7] == ':' &&
         hex_digits(s.substr(8, 2), 2) && s[10] == '.' && s[11] >= '0' && s[11] <= '7';
}

bool is_host_bridge(std::string_view s) {
  return s.size() == 10 && s.starts_with("pci") && hex_digits(s.substr(3, 4), 4) && s[7] == ':' && hex_digits(s.substr(8, 2), 2);
}

Acs find_acs(std::span<const std::uint8_t> config) {
  Acs acs;
  if (config.size() < kLegacyConfigSize) return acs;  // unprivileged read: 64 bytes
  acs.state = Acs::State::kAbsent;
  if (config.size() < kLegacyConfigSize + 4) return acs;  // conventional PCI: no extended space
  std::size_t off = kLegacyConfigSize;
  // A well-formed list visits each dword at most once; a loop in a hostile image ends here.
  for (std::size_t steps = 0; steps < (kConfigSpaceSize - kLegacyConfigSize) / 4; ++steps) {
    if (off + 4 > config.size()) break;
    const std::uint32_t header = le32(config, off);
    if (header == 0 || header == 0xffffffffu) break;
    if ((header & 0xffffu) == kAcsCapabilityId) {
      if (off + 8 > config.size()) break;
      acs.state = Acs::State::kPresent;
      acs.offset = static_cast<std::uint16_t>(off);
      acs.capability = static_cast<std::uint16_t>(config[off + 4] | config[off + 5] << 8);
      acs.control = static_cast<std::uint16_t>(config[off + 6] | config[off + 7] << 8);
      return acs;
    }
    const std::size_t next = (header >> 20) & 0xffcu;
    if (next < kLegacyConfigSize) break;
    off = next;
  }
  return acs;
}

}  // namespace rdma::pci
