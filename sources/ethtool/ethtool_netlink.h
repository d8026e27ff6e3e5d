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
#include "sources/netlink/socket.h"

namespace rdma::ethtool {

// Standard 802.3x pause statistics (ETHTOOL_A_PAUSE_STATS); absent members were not reported.
struct PauseStats {
  std::optional<std::uint64_t> tx_frames;
  std::optional<std::uint64_t> rx_frames;
};
// Pure: an ETHTOOL_MSG_PAUSE_GET_REPLY (nlmsghdr + genlmsghdr + attributes).
Result<PauseStats> decode_pause_reply(std::span<const std::uint8_t> msg);

// The request (the same bytes the tests decode against).
std::vector<std::uint8_t> build_pause_get(std::uint16_t family_id, const std::string& ifname);

// Pause statistics of netdevs by name: resolves the "ethtool" family once.
class PauseReader {
 public:
  explicit PauseReader(std::chrono::milliseconds receive_timeout);
  Result<PauseStats> read(const std::string& ifname);

 private:
  netlink::Socket sock_;
  std::uint16_t family_ = 0;
};

}  // namespace rdma::ethtool
