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

}  // namespace rdma::mad
