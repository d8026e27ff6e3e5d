// Parsers for the text formats of sysfs attributes. Pure functions over bytes: no I/O, so they
// are unit-tested and fuzzed directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rdma::sysfs {

// Strips one trailing "\n" (and any further trailing whitespace; mlx4's link_layer has "\n\n").
std::string_view trim_value(std::string_view raw);

// Exact unsigned 64-bit decimal ("%llu\n"); rejects signs, hex, overflow and trailing junk.
std::optional<std::uint64_t> parse_u64(std::string_view raw);
// "0x%x" (lid, sm_lid, cap_mask) or plain decimal.
std::optional<std::uint64_t> parse_hex_or_dec(std::string_view raw);
// "N: NAME" (state, phys_state, node_type) -> N and NAME.
struct EnumValue {
  std::uint32_t id = 0;
  std::string name;
};
std::optional<EnumValue> parse_enum(std::string_view raw);

// "%d%s Gb/sec (%dX%s)" -> rate in bytes per second, width and speed name.
struct Rate {
  std::uint64_t bytes_per_second = 0;
  std::uint32_t width = 0;   // lanes; 0 when the legacy/odd format omits it
  std::string speed;         // "HDR", "EDR", ... ; empty for legacy "10 Gb/sec (4X)"
};
std::optional<Rate> parse_rate(std::string_view raw);

// True for the legacy literal a failed PMA read printed before ~4.20.
bool is_not_available(std::string_view raw);

// "0c42:a103:0040:29a0" -> "0x0c42a103004029a0" (lower case).
std::optional<std::string> parse_guid(std::string_view raw);

}  // namespace rdma::sysfs
