#include "sources/netlink/rdma_client.h"

#include <libmnl/libmnl.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace rdma::netlink {
namespace {

constexpr std::size_t kRecvBuffer = 64 * 1024;  // hfi1 ports have hundreds of counters

}  // namespace

std::unique_ptr<Client> Client::open(int& err) {
  mnl_socket* s = mnl_socket_open(kNetlinkRdma);
  if (s == nullptr) {
    err = errno;
    return nullptr;
  }
  if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
    err = errno;
    mnl_socket_close(s);
    return nullptr;
  }
  // A kernel that never answers must not hold the collector forever (the scrape timeout
  // reports it; this bounds the thread).
  timeval tv{10, 0};
  setsockopt(mnl_socket_get_fd(s), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  err = 0;
  return std::unique_ptr<Client>(new Client(s));
}

Client::Client(mnl_socket* s) : sock_(s), portid_(mnl_socket_get_portid(s)), seq_(static_cast<std::uint32_t>(time(nullptr))) {}

Client::~Client() { mnl_socket_close(sock_); }

int Client::transact(const std::vector<std::uint8_t>& request, std::uint32_t seq, Decoded& out) {
  ++requests_;
  if (mnl_socket_sendto(sock_, request.data(), request.size()) < 0) return errno;
  std::vector<std::uint8_t> buf(kRecvBuffer);
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(sock_, buf.data(), buf.size());
    if (n < 0) return errno == EAGAIN ? ETIMEDOUT : errno;
    // Walk the messages one by one so that replies to an older, timed-out request are skipped.
    std::size_t off = 0;
    const auto len = static_cast<std::size_t>(n);
    while (off + sizeof(nlmsghdr) <= len) {
      nlmsghdr h;
      std::memcpy(&h, buf.data() + off, sizeof h);
      if (h.nlmsg_len < sizeof h || h.nlmsg_len > len - off) return EBADMSG;
      if (h.nlmsg_seq == seq && h.nlmsg_pid == portid_) {
        Decoded one = decode_messages(buf.data() + off, h.nlmsg_len);
        if (one.malformed) return EBADMSG;
        for (auto& s : one.stats) out.stats.push_back(std::move(s));
        for (auto& d : one.devices) out.devices.push_back(std::move(d));
        if (one.done) return one.error;
      }
      off += NLMSG_ALIGN(h.nlmsg_len);
    }
  }
}

int Client::refresh_devices() {
  const std::uint32_t seq = ++seq_;
  Decoded d;
  const int err = transact(encode_dev_dump(seq), seq, d);
  if (err != 0) return err;
  index_.clear();
  for (auto& e : d.devices) index_[e.name] = e.index;
  return 0;
}

PortReply Client::read_port(const std::string& device, std::uint32_t port) {
  PortReply r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto it = index_.find(device);
    if (it == index_.end() || attempt > 0) {
      if (int err = refresh_devices(); err != 0) {
        r.error = err;
        return r;
      }
      it = index_.find(device);
      if (it == index_.end()) {
        r.error = ENODEV;
        return r;
      }
    }
    const std::uint32_t seq = ++seq_;
    Decoded d;
    const int err = transact(encode_stat_get(seq, it->second, port), seq, d);
    // A stale index (device re-created or renamed) answers EINVAL/ENODEV or another device.
    const bool stale = (err == EINVAL || err == ENODEV) ||
                       (err == 0 && (d.stats.size() != 1 || d.stats[0].dev_name != device || d.stats[0].port != port));
    if (stale && attempt == 0) continue;
    if (err != 0) {
      r.error = err;
      return r;
    }
    if (d.stats.size() != 1 || d.stats[0].dev_name != device || d.stats[0].port != port) {
      r.error = EBADMSG;
      return r;
    }
    r.counters = std::move(d.stats[0].counters);
    return r;
  }
  r.error = EINVAL;
  return r;
}

}  // namespace rdma::netlink
