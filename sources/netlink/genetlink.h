// Generic netlink (NETLINK_GENERIC): messages with a genlmsghdr, and the controller's family
// lookup (CTRL_CMD_GETFAMILY) that turns a family name ("ethtool") into its message type.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/message.h"
#include "sources/netlink/socket.h"

namespace rdma::netlink {

// A request of `family` (build_request with a genlmsghdr).
std::vector<std::uint8_t> build_genl_request(std::uint16_t family, std::uint8_t cmd, std::uint8_t version,
                                             const std::function<void(nlmsghdr*)>& attributes);

std::vector<std::uint8_t> build_get_family(const std::string& name);
// Pure: CTRL_ATTR_FAMILY_ID from a CTRL_CMD_GETFAMILY reply.
Result<std::uint16_t> decode_family_id(Bytes msg);

// The message type of family `name` (one request on `sock`, a NETLINK_GENERIC socket);
// kNotSupported when this kernel has no such family.
Result<std::uint16_t> resolve_family(Socket& sock, const std::string& name);

// The one client of a generic netlink family: a NETLINK_GENERIC socket and the family's message
// type, looked up at the first use and kept (a failed lookup is asked again at the next). The
// readers of one family in one collector share it (the netdev collector's pause and link health
// readers of "ethtool"): one socket, one lookup. Not thread-safe, as Socket.
class GenlClient {
 public:
  GenlClient(std::string family, std::chrono::milliseconds receive_timeout);
  // The family's message type; kNotSupported when this kernel has no such family.
  Result<std::uint16_t> family();
  // The one message answering build(message type) (Socket::request), or the lookup's failure.
  Result<std::vector<std::uint8_t>> request(const std::function<std::vector<std::uint8_t>(std::uint16_t)>& build);
  // For a dump (Socket::transact) of a request built with family().
  Socket& socket() { return sock_; }
  std::uint64_t requests() const { return sock_.requests(); }

 private:
  Socket sock_;
  const std::string name_;
  std::uint16_t family_ = 0;
};

}  // namespace rdma::netlink
