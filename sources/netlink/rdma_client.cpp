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
        for (auto& q : one.qps) out.qps.push_back(std::move(q));
        for (auto& r : one.resources) out.resources.push_back(std::move(r));
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

int Client::device_index(const std::string& device, bool refresh, std::uint32_t& index) {
  auto it = index_.find(device);
  if (it == index_.end() || refresh) {
    if (int err = refresh_devices(); err != 0) return err;
    it = index_.find(device);
    if (it == index_.end()) return ENODEV;
  }
  index = it->second;
  return 0;
}

int Client::device_request(const std::string& device, const Encoder& encode, const Answered& answered, Decoded& out) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::uint32_t index = 0;
    if (int err = device_index(device, attempt > 0, index); err != 0) return err;
    const std::uint32_t seq = ++seq_;
    out = Decoded{};
    const int err = transact(encode(seq, index), seq, out);
    // A stale index (device re-created or renamed) answers EINVAL/ENODEV or another device.
    const bool stale = (err == EINVAL || err == ENODEV) || (err == 0 && !answered(out));
    if (stale && attempt == 0) continue;
    if (err != 0) return err;
    return answered(out) ? 0 : EBADMSG;
  }
  return EINVAL;
}

PortReply Client::read_port(const std::string& device, std::uint32_t port) {
  PortReply r;
  Decoded d;
  r.error = device_request(
      device, [port](std::uint32_t seq, std::uint32_t index) { return encode_stat_get(seq, index, port); },
      [&](const Decoded& a) { return a.stats.size() == 1 && a.stats[0].dev_name == device && a.stats[0].port == port; },
      d);
  if (r.error == 0) r.counters = std::move(d.stats[0].counters);
  return r;
}

QpReply Client::read_qps(const std::string& device) {
  QpReply r;
  Decoded d;
  r.error = device_request(
      device, [](std::uint32_t seq, std::uint32_t index) { return encode_qp_dump(seq, index); },
      [&](const Decoded& a) {
        // A device without QPs sends no RES_QP_GET message at all; every message sent must name it.
        for (const auto& m : a.qps)
          if (m.dev_name != device) return false;
        return true;
      },
      d);
  if (r.error == 0)
    for (auto& m : d.qps)
      for (auto& q : m.qps) r.qps.push_back(std::move(q));
  return r;
}

ResourceReply Client::read_resources() {
  ResourceReply r;
  const std::uint32_t seq = ++seq_;
  Decoded d;
  r.error = transact(encode_res_dump(seq), seq, d);
  if (r.error == 0) r.devices = std::move(d.resources);
  return r;
}

}  // namespace rdma::netlink
