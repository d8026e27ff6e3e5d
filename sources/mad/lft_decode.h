// Forwarding state of a switch as pure functions on SMP attribute bytes: SwitchInfo (SubnMgt
// attribute 0x0012; LinearFDBCap, LinearFDBTop, ...) and one block of the LinearForwardingTable
// (attribute 0x0019). Layouts: IBA vol1 14.2.5.4 (SwitchInfo) and 14.2.5.10 (LinearForwardingTable:
// 64 one-byte port entries per block, the AttributeModifier is the block number, entry i of block b
// is the output port for destination LID 64*b + i). The same fields as rdma-core's libibmad
// (IB_SW_LINEAR_FDB_CAP_F .. IB_SW_LINEAR_FDB_TOP_F in fields.c) and ibtracert's use of them
// (it reads the block of the destination LID and takes entry lid % 64). A short buffer yields
// std::nullopt, never a read past the end; fuzzed in tests/fuzz/fuzz_lft.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace rdma::mad {

inline constexpr std::uint16_t kSmpAttrSwitchInfo = 0x0012;
inline constexpr std::uint16_t kSmpAttrLinearForwardingTable = 0x0019;
inline constexpr std::size_t kLftBlockEntries = 64;
// The highest unicast LID (0xBFFF): LIDs above are multicast and have no linear table entry.
inline constexpr std::uint16_t kMaxUnicastLid = 0xBFFF;
// An entry for a LID that the SM routed nowhere (IBA: "port 255 ... not a valid port").
inline constexpr std::uint8_t kLftNoPort = 0xFF;

struct SwitchInfo {
  std::uint16_t linear_fdb_cap = 0;     // LFT entries the switch has
  std::uint16_t random_fdb_cap = 0;
  std::uint16_t multicast_fdb_cap = 0;
  std::uint16_t linear_fdb_top = 0;     // the highest LID with a valid entry (the SM sets it)
  std::uint8_t default_port = 0;
};
std::optional<SwitchInfo> decode_switch_info(std::span<const std::uint8_t> data);

// How many LFT blocks hold entries up to LinearFDBTop, bounded by the unicast LID space and by the
// table's own capacity (a LinearFDBTop beyond LinearFDBCap is clamped: the switch has no entry
// there). Always at least 1: block 0 exists on every switch (LinearFDBTop 0 is a table that
// holds LID 0 only, i.e. nothing routed yet).
std::size_t lft_blocks(const SwitchInfo& si);

using LftBlock = std::array<std::uint8_t, kLftBlockEntries>;
std::optional<LftBlock> decode_lft_block(std::span<const std::uint8_t> data);

}  // namespace rdma::mad
