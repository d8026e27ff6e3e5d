// One blocking netlink socket (libmnl) for every family the exporter reads: NETLINK_RDMA (nldev:
// hw_counters, QPs), NETLINK_GENERIC (ethtool) and NETLINK_ROUTE (dcbnl). It only sends the
// requests its callers encode and collects the replies to each.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/message.h"

struct mnl_socket;

namespace rdma::netlink {

class Socket {
 public:
  // `receive_timeout` bounds each wait for the kernel: an answer is immediate, so the timeout
  // only decides how long a lost one may hold the caller's thread.
  Socket(int protocol, std::chrono::milliseconds receive_timeout);
  ~Socket();
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Opens and binds the socket unless it is open: 0 or the errno (EPROTONOSUPPORT: this kernel
  // lacks the protocol, e.g. ib_core not loaded for NETLINK_RDMA). transact() calls it.
  int open();

  // Sends `request` (a complete message; nlmsg_seq is set here) and passes each reply message
  // with its sequence number to `on_reply` until that returns true (the last message: the ACK,
  // NLMSG_DONE, or the one answer). Replies to an earlier request that timed out are skipped.
  // Returns 0, the errno of the socket (ETIMEDOUT when the kernel does not answer within the
  // timeout), or EBADMSG when the bytes received are not whole messages.
  using OnReply = std::function<bool(const Message&)>;
  int transact(std::vector<std::uint8_t> request, const OnReply& on_reply);

  // The bytes of the one message answering `request` (a GET without NLM_F_DUMP or NLM_F_ACK):
  // transact()'s errno as a ReadError, or the reply's error as single_reply() gives it.
  Result<std::vector<std::uint8_t>> request(std::vector<std::uint8_t> request);

  // Requests sent so far.
  std::uint64_t requests() const { return requests_; }

 private:
  int protocol_;
  std::chrono::milliseconds timeout_;
  mnl_socket* sock_ = nullptr;
  std::uint32_t portid_ = 0;
  std::uint32_t seq_ = 0;
  std::uint64_t requests_ = 0;
  std::vector<std::uint8_t> buf_;
};

}  // namespace rdma::netlink
