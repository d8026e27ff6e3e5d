// Subnet management attributes (PortInfo 0x0015, SMInfo 0x0020) and the PMA attribute
// PortExtendedSpeedsCounters (0x001F) as pure functions on bytes, plus what a link's two PortInfos
// say about its training. Layouts: IBA vol1 14.2.5.6 (PortInfo), 14.2.5.13 (SMInfo) and 16.1.4.13
// (PortExtendedSpeedsCounters, RS-FEC form as in rdma-core's libibmad fields.c / infiniband-diags
// perfquery --extended_speeds --rsfec); unit-tested against libibmad's field tables and fuzzed
// (a short buffer yields std::nullopt, never a read past the end).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rdma::mad {

inline constexpr std::size_t kSmpDataSize = 64;  // SMP attribute data (LID-routed and directed)

// LinkWidth* bits (IBA 14.2.5.6, Table 155): 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x.
// LinkSpeed* bits: 1 = SDR, 2 = DDR, 4 = QDR; LinkSpeedExt* bits: 1 = FDR, 2 = EDR, 4 = HDR, 8 = NDR.
// LinkSpeedExtEnabled is 5 bits: 30 means "as supported" (taken as LinkSpeedExtSupported here).
// XDR lives in IBA 1.7's LinkSpeedExt2* fields (byte 56 of PortInfo, bit offsets 449/451/453), which
// the layout of Debian's libibmad (rdma-core 44) does not have; decoded here from the raw bits at the
// offsets newer rdma-core's libibmad uses (fields.c "More PortInfo fields (XDR)":
// LinkSpeedExtActive2 449/2, LinkSpeedExtSupported2 451/2, LinkSpeedExtEnabled2 453/3; dump.c: Active2
// 1 = 212.5 Gb/s, Supported2/Enabled2 bit 0 = XDR). Reserved (zero) on ports older than IBA 1.7.
struct PortInfo {
  std::uint16_t lid = 0;
  std::uint16_t master_sm_lid = 0;
  std::uint32_t capability_mask = 0;
  std::uint8_t local_port = 0;
  std::uint8_t width_enabled = 0, width_supported = 0, width_active = 0;
  std::uint8_t speed_supported = 0, speed_active = 0, speed_enabled = 0;
  std::uint8_t port_state = 0;           // 1 down, 2 init, 3 armed, 4 active
  std::uint8_t phys_state = 0;           // 1 sleep, 2 polling, 3 disabled, 4 training, 5 linkup, ...
  std::uint8_t link_down_default = 0;    // 0 no change, 1 sleep, 2 polling
  std::uint16_t capability_mask2 = 0;
  std::uint8_t speed_ext_active = 0, speed_ext_supported = 0, speed_ext_enabled = 0;
  std::uint8_t speed_ext2_active = 0, speed_ext2_supported = 0, speed_ext2_enabled = 0;  // XDR (IBA 1.7)
  bool is_sm() const { return capability_mask & (1u << 1); }
  bool ext_speeds() const { return capability_mask & (1u << 14); }  // IsExtendedSpeedsSupported
};
std::optional<PortInfo> decode_port_info(std::span<const std::uint8_t> data);

// One width or speed as the exporter names it ("4x", "HDR"), lanes and Gb/s per lane; name "" when
// the value has no bit set.
struct Width {
  std::uint8_t bit = 0;
  std::string_view name;
  unsigned lanes = 0;
};
struct Speed {
  std::uint8_t rank = 0;  // orders SDR < DDR < QDR < FDR < EDR < HDR < NDR < XDR; 0 = none
  std::string_view name;
  double gbps_per_lane = 0;  // signalling rate as iblinkinfo prints it
};
Width widest(std::uint8_t width_bits);  // the widest width in a LinkWidth* mask
// The fastest speed in a (LinkSpeed*, LinkSpeedExt*) pair of masks; ext bits win when set.
Speed fastest(std::uint8_t speed_bits, std::uint8_t ext_bits);
Speed xdr();  // 212.5 Gb/s per lane (LinkSpeedExt2* bit 0)
// The active speed of a port: XDR when LinkSpeedExtActive2 says so, else LinkSpeedExtActive when the
// port has extended speeds and one is set, else LinkSpeedActive.
Speed active_speed(const PortInfo& p);

// What a link trained at against what its two ends could train at: the best width and speed that
// both ends support and at least one end enables. "Enabled on one end" and not "on both" because a
// port held below its hardware by its own configuration (or by firmware after a lane failure) is
// exactly the fault to show; a link whose two ends are both configured lower is left alone.
struct LinkTraining {
  Width active_width, possible_width;
  Speed active_speed, possible_speed;
  bool degraded() const {
    return (possible_width.lanes && active_width.lanes < possible_width.lanes) ||
           (possible_speed.rank && active_speed.rank < possible_speed.rank);
  }
};
LinkTraining link_training(const PortInfo& a, const PortInfo& b);

std::string_view phys_state_name(std::uint8_t s);   // "polling", "linkup", ... ("unknown")
std::string_view port_state_name(std::uint8_t s);   // "down", "init", "armed", "active" ("unknown")

// SMInfo (SubnMgt attribute 0x0020).
struct SmInfo {
  std::uint64_t guid = 0;
  std::uint64_t sm_key = 0;
  std::uint32_t act_count = 0;
  std::uint8_t priority = 0;
  std::uint8_t state = 0;  // 0 not active, 1 discovering, 2 standby, 3 master
};
std::optional<SmInfo> decode_sm_info(std::span<const std::uint8_t> data);
std::string_view sm_state_name(std::uint8_t s);  // "not_active", "discovering", "standby", "master"

// PortExtendedSpeedsCounters (PMA attribute 0x001F): the FEC form (per-lane FEC block counters) or,
// when the agent's ClassPortInfo sets IsPMRSFECCountersSupported (kCapRsFec) and rs_fec is asked,
// the RS-FEC form (per-lane corrected symbols, port-wide block counters).
inline constexpr std::uint16_t kPmaAttrExtSpeedsCounters = 0x001F;
inline constexpr std::uint16_t kCapRsFec = 1u << 14;
struct ExtSpeedsCounters {
  bool rs_fec = false;
  std::uint8_t port_select = 0;
  std::uint64_t counter_select = 0;
  std::uint32_t sync_header_errors = 0;   // 16
  std::uint32_t unknown_blocks = 0;       // 16
  std::array<std::uint32_t, 12> error_detection_per_lane{};   // 16 each (FEC form only)
  std::array<std::uint32_t, 12> fec_correctable_per_lane{};   // 32 each (FEC form)
  std::array<std::uint32_t, 12> fec_uncorrectable_per_lane{}; // 32 each (FEC form)
  std::array<std::uint32_t, 12> corrected_symbols_per_lane{}; // 32 each (RS-FEC form)
  std::uint32_t correctable_blocks = 0;    // 32 (RS-FEC form)
  std::uint32_t uncorrectable_blocks = 0;  // 32 (RS-FEC form)
  std::uint32_t corrected_symbols = 0;     // 32 (RS-FEC form)
};
// data: the 192 bytes of PMA attribute data.
std::optional<ExtSpeedsCounters> decode_ext_speeds_counters(std::span<const std::uint8_t> data, bool rs_fec);

}  // namespace rdma::mad
