// The physical layer of a netdev over ethtool netlink: link state with the reason a link is down
// (ETHTOOL_MSG_LINKSTATE_GET: link, SQI, extended state/substate, the driver's link down count)
// and FEC (ETHTOOL_MSG_FEC_GET with ETHTOOL_FLAG_STATS: active mode, corrected and uncorrectable
// blocks, corrected bits, per lane where the driver gives lanes, and the FEC histogram of newer
// kernels). Decoders are pure and take the raw bytes of one reply; nothing in them is trusted.
//
// Attribute numbers newer than the build's <linux/ethtool_netlink.h> (Debian's 6.1 headers) are
// given here from include/uapi/linux/ethtool_netlink(_generated).h, so that a binary built on
// bookworm decodes what a newer kernel sends.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/genetlink.h"

namespace rdma::ethtool {

// ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT (u32, kernels after 6.1), ETHTOOL_A_FEC_STAT_HIST (nest, 6.18) and
// its ETHTOOL_A_FEC_HIST_* members.
inline constexpr std::uint16_t kLinkStateExtDownCount = 7;
inline constexpr std::uint16_t kFecStatHist = 5;
inline constexpr std::uint16_t kFecHistBinLow = 2, kFecHistBinHigh = 3, kFecHistBinValue = 4, kFecHistBinValuePerLane = 5;

struct LinkState {
  std::optional<bool> link;                  // ETHTOOL_A_LINKSTATE_LINK (the driver's get_link)
  std::optional<std::uint32_t> sqi, sqi_max; // signal quality index (PHYs that have one)
  std::optional<std::uint8_t> ext_state;     // enum ethtool_link_ext_state: why the link is down
  std::optional<std::uint8_t> ext_substate;  // its substate enum, 0/absent when none
  std::optional<std::uint32_t> down_count;   // link_down_events of the driver (kernels after 6.1)
};
// Pure: an ETHTOOL_MSG_LINKSTATE_GET_REPLY (nlmsghdr + genlmsghdr + attributes).
Result<LinkState> decode_linkstate_reply(std::span<const std::uint8_t> msg);

// A FEC statistic as the kernel writes it (fec_stats_recalc): an array of u64, [0] the total
// and [1..] the lanes when the driver counts per lane (at most ETHTOOL_MAX_LANES = 8).
struct FecCounter {
  std::optional<std::uint64_t> total;
  std::vector<std::uint64_t> lanes;
};
// One bin of the FEC histogram: codewords with low..high bit errors corrected.
struct FecHistogramBin {
  std::uint32_t low = 0, high = 0;
  std::optional<std::uint64_t> codewords;
  std::vector<std::uint64_t> lanes;
};
struct FecState {
  std::optional<std::uint32_t> active_mode_bit;  // ETHTOOL_LINK_MODE_FEC_*_BIT; absent: no FEC mode set
  std::optional<bool> automatic;                 // ETHTOOL_A_FEC_AUTO
  FecCounter corrected_blocks, uncorrectable_blocks, corrected_bits;
  std::vector<FecHistogramBin> histogram;
};
inline constexpr std::size_t kMaxLanes = 8;
inline constexpr std::size_t kMaxHistogramBins = 64;  // the kernel's ETHTOOL_FEC_HIST_MAX is 18
// Pure: an ETHTOOL_MSG_FEC_GET_REPLY.
Result<FecState> decode_fec_reply(std::span<const std::uint8_t> msg);

// Label values, from tables mirroring include/uapi/linux/ethtool.h (enum ethtool_link_ext_state
// and the ethtool_link_ext_substate_* enums); a value the table does not know is "state_N" or
// "substate_N", never dropped.
std::string ext_state_label(std::uint8_t state);
std::string ext_substate_label(std::uint8_t state, std::uint8_t substate);  // "" for substate 0
// "none", "rs", "baser", "llrs" for the link mode bit of ETHTOOL_A_FEC_ACTIVE, else "bit_N".
std::string fec_mode_label(std::uint32_t link_mode_bit);

// With `stats`, ETHTOOL_FLAG_STATS: the driver's link down count (kernels whose policy has it).
std::vector<std::uint8_t> build_linkstate_get(std::uint16_t family_id, const std::string& ifname, bool stats);
std::vector<std::uint8_t> build_fec_get(std::uint16_t family_id, const std::string& ifname);

// Link state and FEC of netdevs by name, over the caller's "ethtool" client (kGenlFamily), which
// outlives it. kNotSupported: the kernel has no ethtool netlink or the driver lacks the op.
class LinkHealthReader {
 public:
  explicit LinkHealthReader(netlink::GenlClient& ethtool) : client_(ethtool) {}
  Result<LinkState> linkstate(const std::string& ifname);
  Result<FecState> fec(const std::string& ifname);

 private:
  netlink::GenlClient& client_;
  bool linkstate_stats_ = true;
};

}  // namespace rdma::ethtool
