// A blocking RDMA netlink client (libmnl) that reads a port's hw_counters with one
// RDMA_NLDEV_CMD_STAT_GET request, the way `rdma statistic show link DEV/PORT` does, and the
// resource tracker's QPs the way `rdma resource show qp` does. It only reads: it never sends STAT_SET/STAT_DEL, so counter configuration is never changed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sources/netlink/rdma_stat.h"
#include "sources/netlink/socket.h"

namespace rdma::netlink {

struct PortReply {
  int error = 0;           // errno: from the socket or the kernel's NLMSG_ERROR; EBADMSG when malformed
  std::vector<HwCounter> counters;
};

struct QpReply {
  int error = 0;  // as PortReply
  std::vector<QpEntry> qps;
};

struct ResourceReply {
  int error = 0;  // as PortReply
  std::vector<ResourceSummary> devices;
};

class Client {
 public:
  // Opens and binds a NETLINK_RDMA socket whose waits for an answer last at most
  // `receive_timeout`. nullptr and `err` set (EPROTONOSUPPORT: the kernel has no RDMA netlink,
  // e.g. ib_core not loaded) when it cannot.
  static std::unique_ptr<Client> open(std::chrono::milliseconds receive_timeout, int& err);

  // The port's counters. Device names are resolved to the kernel's device index with one
  // CMD_GET dump, cached, and refreshed when a name is unknown or a reply names another device.
  PortReply read_port(const std::string& device, std::uint32_t port);

  // The device's queue pairs (RES_QP_GET dump), with their owners. Same index cache as read_port.
  QpReply read_qps(const std::string& device);
  // Resource counts of every device (one RES_GET dump).
  ResourceReply read_resources();

  // Requests sent so far (STAT_GET and device dumps).
  std::uint64_t requests() const { return sock_.requests(); }

 private:
  explicit Client(std::chrono::milliseconds receive_timeout) : sock_(kNetlinkRdma, receive_timeout) {}
  // Sends one request and decodes the replies to it until the ACK/DONE (EBADMSG: one is
  // malformed; else the kernel's errno).
  int transact(std::vector<std::uint8_t> request, Decoded& out);
  int refresh_devices();
  // The device's index, refreshing the cache when `refresh` or the name is unknown; ENODEV when
  // the kernel does not know the name.
  int device_index(const std::string& device, bool refresh, std::uint32_t& index);
  using Encoder = std::function<std::vector<std::uint8_t>(std::uint32_t index)>;
  using Answered = std::function<bool(const Decoded&)>;  // the replies name the device asked for
  // One request for `device` by its cached index; when the answer shows the index is stale
  // (EINVAL/ENODEV, or not `answered`), refreshes the index and retries once. EBADMSG when the
  // retry is not answered either.
  int device_request(const std::string& device, const Encoder& encode, const Answered& answered, Decoded& out);

  Socket sock_;
  std::map<std::string, std::uint32_t, std::less<>> index_;
};

}  // namespace rdma::netlink
