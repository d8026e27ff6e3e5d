#include "sources/sysfs/parse.h"

#include <charconv>
#include <cstdio>

namespace rdma::sysfs {
namespace {

bool is_space(char c) { return c == '\n' || c == ' ' || c == '\t' || c == '\r' || c == '\0'; }

std::optional<std::uint64_t> parse_digits(std::string_view s, int base) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parses a decimal like "2.5" or "400" into tenths, exactly.
std::optional<std::uint64_t> parse_tenths(std::string_view s) {
  auto dot = s.find('.');
  auto whole = parse_digits(s.substr(0, dot), 10);
  if (!whole) return std::nullopt;
  std::uint64_t tenths = *whole * 10;
  if (dot != std::string_view::npos) {
    auto frac = s.substr(dot + 1);
    if (frac.size() != 1 || frac[0] < '0' || frac[0] > '9') return std::nullopt;
    tenths += static_cast<std::uint64_t>(frac[0] - '0');
  }
  return tenths;
}

}  // namespace

std::string_view trim_value(std::string_view raw) {
  while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
  while (!raw.empty() && (raw.front() == ' ' || raw.front() == '\t')) raw.remove_prefix(1);
  return raw;
}

std::optional<std::uint64_t> parse_u64(std::string_view raw) {
  return parse_digits(trim_value(raw), 10);
}

std::optional<std::uint64_t> parse_hex_or_dec(std::string_view raw) {
  auto s = trim_value(raw);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return parse_digits(s.substr(2), 16);
  return parse_digits(s, 10);
}

std::optional<EnumValue> parse_enum(std::string_view raw) {
  auto s = trim_value(raw);
  auto colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto id = parse_digits(s.substr(0, colon), 10);
  if (!id || *id > 0xffffffffu) return std::nullopt;
  auto name = trim_value(s.substr(colon + 1));
  return EnumValue{static_cast<std::uint32_t>(*id), std::string(name)};
}

std::optional<Rate> parse_rate(std::string_view raw) {
  // Accepts "200 Gb/sec (4X HDR)", legacy "10 Gb/sec (4X)" and "0 GB/sec".
  auto s = trim_value(raw);
  auto space = s.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto tenths = parse_tenths(s.substr(0, space));
  if (!tenths) return std::nullopt;
  auto rest = s.substr(space + 1);
  if (rest.substr(0, 6) != "Gb/sec" && rest.substr(0, 6) != "GB/sec") return std::nullopt;
  Rate r;
  // tenths of Gbit/s -> bytes/s: x * 1e8 bits / 8.
  r.bytes_per_second = *tenths * 12'500'000ULL;
  auto open = rest.find('(');
  if (open != std::string_view::npos) {
    auto close = rest.find(')', open);
    if (close == std::string_view::npos) return std::nullopt;
    auto inner = rest.substr(open + 1, close - open - 1);  // "4X HDR"
    auto x = inner.find('X');
    if (x == std::string_view::npos) return std::nullopt;
    auto width = parse_digits(inner.substr(0, x), 10);
    if (!width || *width > 64) return std::nullopt;
    r.width = static_cast<std::uint32_t>(*width);
    r.speed = std::string(trim_value(inner.substr(x + 1)));
  }
  return r;
}

bool is_not_available(std::string_view raw) { return trim_value(raw).substr(0, 3) == "N/A"; }

std::optional<std::string> parse_guid(std::string_view raw) {
  auto s = trim_value(raw);
  // Four groups of four hex digits separated by ':'.
  if (s.size() != 19) return std::nullopt;
  std::string out = "0x";
  out.reserve(18);
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i % 5 == 4) {
      if (c != ':') return std::nullopt;
      continue;
    }
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return std::nullopt;
    out.push_back(static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c));
  }
  return out;
}

}  // namespace rdma::sysfs
