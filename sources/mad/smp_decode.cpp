#include "sources/mad/smp_decode.h"

#include "sources/mad/pma_decode.h"

namespace rdma::mad {

using Bits = FieldReader;

std::optional<PortInfo> decode_port_info(std::span<const std::uint8_t> data) {
  if (data.size() < kSmpDataSize) return std::nullopt;
  Bits b{data};
  PortInfo p;
  p.lid = static_cast<std::uint16_t>(b(128, 16));
  p.master_sm_lid = static_cast<std::uint16_t>(b(144, 16));
  p.capability_mask = b.u32(160, 32);
  p.local_port = b.u8(224, 8);
  p.width_enabled = b.u8(232, 8);
  p.width_supported = b.u8(240, 8);
  p.width_active = b.u8(248, 8);
  p.speed_supported = b.u8(256, 4);
  p.port_state = b.u8(260, 4);
  p.phys_state = b.u8(264, 4);
  p.link_down_default = b.u8(268, 4);
  p.speed_active = b.u8(280, 4);
  p.speed_enabled = b.u8(284, 4);
  p.capability_mask2 = static_cast<std::uint16_t>(b(480, 16));
  p.speed_ext_active = b.u8(496, 4);
  p.speed_ext_supported = b.u8(500, 4);
  p.speed_ext_enabled = b.u8(507, 5);
  p.speed_ext2_active = b.u8(449, 2);
  p.speed_ext2_supported = b.u8(451, 2);
  p.speed_ext2_enabled = b.u8(453, 3);
  return p;
}

Width widest(std::uint8_t bits) {
  if (bits & 8) return {8, "12x", 12};
  if (bits & 4) return {4, "8x", 8};
  if (bits & 2) return {2, "4x", 4};
  if (bits & 16) return {16, "2x", 2};
  if (bits & 1) return {1, "1x", 1};
  return {};
}

Speed xdr() { return {8, "XDR", 212.5}; }

Speed fastest(std::uint8_t speed_bits, std::uint8_t ext_bits) {
  if (ext_bits & 8) return {7, "NDR", 106.25};
  if (ext_bits & 4) return {6, "HDR", 53.125};
  if (ext_bits & 2) return {5, "EDR", 25.78125};
  if (ext_bits & 1) return {4, "FDR", 14.0625};
  if (speed_bits & 4) return {3, "QDR", 10.0};
  if (speed_bits & 2) return {2, "DDR", 5.0};
  if (speed_bits & 1) return {1, "SDR", 2.5};
  return {};
}

namespace {
std::uint8_t ext_enabled_bits(const PortInfo& p) {
  if (!p.ext_speeds()) return 0;
  if (p.speed_ext_enabled == 30) return p.speed_ext_supported;  // "set to supported"
  return static_cast<std::uint8_t>(p.speed_ext_enabled & 0x0f);
}
std::uint8_t ext_supported_bits(const PortInfo& p) { return p.ext_speeds() ? p.speed_ext_supported : 0; }
}  // namespace

Speed active_speed(const PortInfo& p) {
  if (p.speed_ext2_active == 1) return xdr();
  const Speed ext = fastest(0, p.ext_speeds() ? p.speed_ext_active : 0);
  return ext.rank ? ext : fastest(p.speed_active, 0);
}

LinkTraining link_training(const PortInfo& a, const PortInfo& b) {
  LinkTraining t;
  t.active_width = widest(a.width_active);
  t.active_speed = active_speed(a);
  const auto width_sup = static_cast<std::uint8_t>(a.width_supported & b.width_supported);
  t.possible_width = widest(static_cast<std::uint8_t>(width_sup & (a.width_enabled | b.width_enabled)));
  const auto speed_sup = static_cast<std::uint8_t>(a.speed_supported & b.speed_supported);
  const auto ext_sup = static_cast<std::uint8_t>(ext_supported_bits(a) & ext_supported_bits(b));
  t.possible_speed = fastest(static_cast<std::uint8_t>(speed_sup & (a.speed_enabled | b.speed_enabled)),
                             static_cast<std::uint8_t>(ext_sup & (ext_enabled_bits(a) | ext_enabled_bits(b))));
  // XDR by the same rule: both ends support it (LinkSpeedExtSupported2) and one enables it.
  if ((a.speed_ext2_supported & b.speed_ext2_supported & 1) && ((a.speed_ext2_enabled | b.speed_ext2_enabled) & 1))
    t.possible_speed = xdr();
  return t;
}

std::string_view phys_state_name(std::uint8_t s) {
  switch (s) {
    case 1: return "sleep";
    case 2: return "polling";
    case 3: return "disabled";
    case 4: return "port_configuration_training";
    case 5: return "linkup";
    case 6: return "link_error_recovery";
    case 7: return "phy_test";
    default: return "unknown";
  }
}

std::string_view port_state_name(std::uint8_t s) {
  switch (s) {
    case 1: return "down";
    case 2: return "init";
    case 3: return "armed";
    case 4: return "active";
    default: return "unknown";
  }
}

std::optional<SmInfo> decode_sm_info(std::span<const std::uint8_t> data) {
  if (data.size() < 21) return std::nullopt;
  Bits b{data};
  SmInfo s;
  s.guid = b(0, 64);
  s.sm_key = b(64, 64);
  s.act_count = b.u32(128, 32);
  s.priority = b.u8(160, 4);
  s.state = b.u8(164, 4);
  return s;
}

std::string_view sm_state_name(std::uint8_t s) {
  switch (s) {
    case 0: return "not_active";
    case 1: return "discovering";
    case 2: return "standby";
    case 3: return "master";
    default: return "unknown";
  }
}

std::optional<ExtSpeedsCounters> decode_ext_speeds_counters(std::span<const std::uint8_t> data, bool rs_fec) {
  if (data.size() < 152) return std::nullopt;  // through PortFECCorrectedSymbolCounter (bit 1216)
  Bits b{data};
  ExtSpeedsCounters c;
  c.rs_fec = rs_fec;
  c.port_select = b.u8(8, 8);
  c.counter_select = b(64, 64);
  c.sync_header_errors = b.u32(128, 16);
  c.unknown_blocks = b.u32(144, 16);
  for (std::size_t i = 0; i < 12; ++i) {
    if (rs_fec) {
      c.corrected_symbols_per_lane[i] = b.u32(352 + 32 * i, 32);
    } else {
      c.error_detection_per_lane[i] = b.u32(160 + 16 * i, 16);
      c.fec_correctable_per_lane[i] = b.u32(352 + 32 * i, 32);
      c.fec_uncorrectable_per_lane[i] = b.u32(736 + 32 * i, 32);
    }
  }
  if (rs_fec) {
    c.correctable_blocks = b.u32(1120, 32);
    c.uncorrectable_blocks = b.u32(1152, 32);
    c.corrected_symbols = b.u32(1184, 32);
  }
  return c;
}

}  // namespace rdma::mad
