// Ethtool over generic netlink (the "ethtool" family, kernels >= 5.6): the standard 802.3x pause
// statistics of a netdev (ETHTOOL_MSG_PAUSE_GET with ETHTOOL_FLAG_STATS). The decoder takes the
// raw bytes of one reply and never trusts a length in it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/genetlink.h"

namespace rdma::ethtool {

// The generic netlink family of ethtool (ETHTOOL_GENL_NAME): the name a collector's one
// netlink::GenlClient for the readers below is made with.
inline constexpr const char* kGenlFamily = "ethtool";

// Standard 802.3x pause statistics (ETHTOOL_A_PAUSE_STATS); absent members were not reported.
struct PauseStats {
  std::optional<std::uint64_t> tx_frames;
  std::optional<std::uint64_t> rx_frames;
};
// Pure: an ETHTOOL_MSG_PAUSE_GET_REPLY (nlmsghdr + genlmsghdr + attributes).
Result<PauseStats> decode_pause_reply(std::span<const std::uint8_t> msg);

// The request (the same bytes the tests decode against).
std::vector<std::uint8_t> build_pause_get(std::uint16_t family_id, const std::string& ifname);

// Pause statistics of netdevs by name, over the caller's "ethtool" client (kGenlFamily), which
// outlives it.
class PauseReader {
 public:
  explicit PauseReader(netlink::GenlClient& ethtool) : client_(ethtool) {}
  Result<PauseStats> read(const std::string& ifname);

 private:
  netlink::GenlClient& client_;
};

}  // namespace rdma::ethtool
