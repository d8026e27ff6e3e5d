#include "sources/mad/lft_decode.h"

#include <algorithm>

#include "sources/mad/pma_decode.h"
#include "sources/mad/smp_decode.h"

namespace rdma::mad {

std::optional<SwitchInfo> decode_switch_info(std::span<const std::uint8_t> data) {
  if (data.size() < 9) return std::nullopt;  // through DefaultPort (bits 64..71)
  FieldReader b{data};
  SwitchInfo s;
  s.linear_fdb_cap = static_cast<std::uint16_t>(b(0, 16));
  s.random_fdb_cap = static_cast<std::uint16_t>(b(16, 16));
  s.multicast_fdb_cap = static_cast<std::uint16_t>(b(32, 16));
  s.linear_fdb_top = static_cast<std::uint16_t>(b(48, 16));
  s.default_port = b.u8(64, 8);
  return s;
}

std::size_t lft_blocks(const SwitchInfo& si) {
  std::size_t top = std::min<std::size_t>(si.linear_fdb_top, kMaxUnicastLid);
  // A cap of 0 is taken as "not reported" (some switches leave it so): the top alone bounds it.
  if (si.linear_fdb_cap) top = std::min<std::size_t>(top, si.linear_fdb_cap - 1u);
  return top / kLftBlockEntries + 1;
}

std::optional<LftBlock> decode_lft_block(std::span<const std::uint8_t> data) {
  if (data.size() < kLftBlockEntries) return std::nullopt;
  LftBlock b{};
  std::copy_n(data.begin(), kLftBlockEntries, b.begin());
  return b;
}

std::optional<AdaptiveRoutingInfo> decode_adaptive_routing_info(std::span<const std::uint8_t> data) {
  if (data.size() < kAdaptiveRoutingInfoSize) return std::nullopt;
  FieldReader b{data};
  AdaptiveRoutingInfo a;
  a.enabled = b(31, 1);
  a.arn_supported = b(30, 1);
  a.frn_supported = b(29, 1);
  a.fr_supported = b(28, 1);
  a.fr_enabled = b(27, 1);
  a.rn_xmit_enabled = b(26, 1);
  a.sub_grps_active = b.u8(20, 4);
  a.direction_num_sup = b.u8(8, 8);
  a.no_fallback = b(7, 1);
  a.glb_groups = b(5, 1);
  a.by_sl_cap = b(4, 1);
  a.by_sl_en = b(3, 1);
  a.by_transport_cap = b(2, 1);
  a.group_table_cap = b.u8(36, 4);
  a.group_top = static_cast<std::uint16_t>(b(40, 12));
  a.group_cap = static_cast<std::uint16_t>(b(52, 12));
  a.enable_by_sl_mask = static_cast<std::uint16_t>(b(64, 16));
  a.rn_version_cap = b.u8(88, 4);
  a.ar_version_cap = b.u8(92, 4);
  a.by_transport_disable = b.u8(120, 8);
  a.ageing_time_us = b.u32(128, 32);
  return a;
}

}  // namespace rdma::mad
