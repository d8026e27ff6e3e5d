// A small netlink request/response helper over libmnl (rtnetlink for dcbnl, generic netlink for
// ethtool), and the pure decoders of the ethtool-netlink replies the netdev collector uses.
// Decoders take the raw bytes of one message and never trust a length in it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sources/common/result.h"

struct mnl_socket;
struct nlmsghdr;
struct nlattr;

namespace rdma::netlink {

// One netlink socket of a protocol (NETLINK_ROUTE, NETLINK_GENERIC), opened lazily.
class Socket {
 public:
  explicit Socket(int protocol) : protocol_(protocol) {}
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Sends one request (a complete nlmsghdr with NLM_F_REQUEST; seq is filled in) and returns the
  // bytes of the one reply message with that sequence number. An NLMSG_ERROR reply with a
  // non-zero error becomes that errno's ReadError (EOPNOTSUPP -> kNotSupported); an answer that
  // does not arrive within the receive timeout is kTimeout.
  Result<std::vector<std::uint8_t>> request(std::vector<std::uint8_t> msg);

 private:
  int protocol_;
  mnl_socket* sock_ = nullptr;
  std::uint32_t seq_ = 0;
};

// One message copied into u32-aligned storage (libmnl reads headers in place); header() is null
// unless the bytes hold a complete nlmsghdr whose length fits.
class AlignedMessage {
 public:
  explicit AlignedMessage(std::span<const std::uint8_t> bytes);
  const nlmsghdr* header() const;

 private:
  std::vector<std::uint32_t> words_;
  std::size_t size_;
};
// Calls f for each attribute after `offset` payload bytes (genlmsghdr, dcbmsg); false when an
// attribute overruns the message (f may have been called for the ones before).
bool walk_attributes(const nlmsghdr* nlh, std::size_t offset, const std::function<void(const nlattr*)>& f);
bool walk_nested(const nlattr* nest, const std::function<void(const nlattr*)>& f);

// Pure: the errno carried by an NLMSG_ERROR message (0 for an ACK), nullopt for another type.
std::optional<int> error_code(std::span<const std::uint8_t> msg);

// Pure: CTRL_ATTR_FAMILY_ID from a CTRL_CMD_GETFAMILY reply.
Result<std::uint16_t> decode_family_id(std::span<const std::uint8_t> msg);

// Standard 802.3x pause statistics (ETHTOOL_A_PAUSE_STATS); absent members were not reported.
struct PauseStats {
  std::optional<std::uint64_t> tx_frames;
  std::optional<std::uint64_t> rx_frames;
};
// Pure: an ETHTOOL_MSG_PAUSE_GET_REPLY (nlmsghdr + genlmsghdr + attributes).
Result<PauseStats> decode_pause_reply(std::span<const std::uint8_t> msg);

// Request builders (the same bytes the tests decode against).
std::vector<std::uint8_t> build_get_family(const std::string& name);
std::vector<std::uint8_t> build_pause_get(std::uint16_t family_id, const std::string& ifname);

// Ethtool-netlink pause statistics of one netdev: resolves the "ethtool" family once.
class PauseReader {
 public:
  PauseReader();
  Result<PauseStats> read(const std::string& ifname);

 private:
  Socket sock_;
  std::uint16_t family_ = 0;
};

}  // namespace rdma::netlink
