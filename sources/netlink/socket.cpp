#include "sources/netlink/socket.h"

#include <libmnl/libmnl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

namespace rdma::netlink {
namespace {

// One recv() takes up to this much: hfi1 ports have hundreds of counters in one STAT_GET reply.
constexpr std::size_t kRecvBuffer = 64 * 1024;

}  // namespace

Socket::Socket(int protocol, std::chrono::milliseconds receive_timeout) : protocol_(protocol), timeout_(receive_timeout) {}

Socket::~Socket() {
  if (sock_) mnl_socket_close(sock_);
}

int Socket::open() {
  if (sock_) return 0;
  mnl_socket* s = mnl_socket_open(protocol_);
  if (!s) return errno;
  if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
    const int err = errno;
    mnl_socket_close(s);
    return err;
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout_).count();
  timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
  setsockopt(mnl_socket_get_fd(s), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sock_ = s;
  portid_ = mnl_socket_get_portid(s);
  buf_.resize(kRecvBuffer);
  return 0;
}

int Socket::transact(std::vector<std::uint8_t> request, const OnReply& on_reply) {
  if (int err = open(); err != 0) return err;
  if (request.size() < sizeof(nlmsghdr)) return EINVAL;
  const std::uint32_t seq = ++seq_;
  reinterpret_cast<nlmsghdr*>(request.data())->nlmsg_seq = seq;
  ++requests_;
  if (mnl_socket_sendto(sock_, request.data(), request.size()) < 0) return errno;
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(sock_, buf_.data(), buf_.size());
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno;
    bool last = false;
    // The kernel addresses its replies to this socket's port id (0 from some families).
    const bool whole = for_each_message(Bytes(buf_.data(), static_cast<std::size_t>(n)), [&](const Message& m) {
      if (!last && m.header.nlmsg_seq == seq && (m.header.nlmsg_pid == portid_ || m.header.nlmsg_pid == 0)) last = on_reply(m);
    });
    if (last) return 0;
    if (!whole) return EBADMSG;
  }
}

Result<std::vector<std::uint8_t>> Socket::request(std::vector<std::uint8_t> request) {
  using R = Result<std::vector<std::uint8_t>>;
  std::vector<std::uint8_t> reply;
  const int err = transact(std::move(request), [&](const Message& m) {
    reply.assign(m.bytes.begin(), m.bytes.end());
    return true;
  });
  if (err != 0) return R::failure(err == EBADMSG ? ReadError::kMalformed : classify_errno(err), err);
  if (auto one = single_reply(reply); !one) return R::failure(one.error, one.sys_errno);
  return R::success(std::move(reply));
}

}  // namespace rdma::netlink
