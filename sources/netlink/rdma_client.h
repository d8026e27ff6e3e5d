// A blocking RDMA netlink client (libmnl) that reads a port's hw_counters with one
// RDMA_NLDEV_CMD_STAT_GET request, the way `rdma statistic show link DEV/PORT` does. It only
// reads: it never sends STAT_SET/STAT_DEL, so counter configuration is never changed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sources/netlink/rdma_stat.h"

struct mnl_socket;

namespace rdma::netlink {

struct PortReply {
  int error = 0;           // errno: from the socket or the kernel's NLMSG_ERROR; EBADMSG when malformed
  std::vector<HwCounter> counters;
};

class Client {
 public:
  // Opens and binds a NETLINK_RDMA socket. nullptr and `err` set (EPROTONOSUPPORT: the kernel
  // has no RDMA netlink, e.g. ib_core not loaded) when it cannot.
  static std::unique_ptr<Client> open(int& err);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The port's counters. Device names are resolved to the kernel's device index with one
  // CMD_GET dump, cached, and refreshed when a name is unknown or a reply names another device.
  PortReply read_port(const std::string& device, std::uint32_t port);

  // Requests sent so far (STAT_GET and device dumps).
  std::uint64_t requests() const { return requests_; }

 private:
  explicit Client(mnl_socket* s);
  // Sends one request and collects the replies with its sequence number until the ACK/DONE.
  int transact(const std::vector<std::uint8_t>& request, std::uint32_t seq, Decoded& out);
  int refresh_devices();

  mnl_socket* sock_;
  std::uint32_t portid_ = 0;
  std::uint32_t seq_ = 0;
  std::uint64_t requests_ = 0;
  std::map<std::string, std::uint32_t, std::less<>> index_;
};

}  // namespace rdma::netlink
