#include "collectors/prober/wire/path_tracer.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/wire/trace_packet.h"

namespace rdma::collectors::prober {
namespace {

using Clock = std::chrono::steady_clock;

std::string setup_failure(int err) {
  if (err == EADDRINUSE) return "port_in_use";
  if (err == EPERM || err == EACCES) return "permission";
  return "socket";
}

struct Endpoints {
  sockaddr_storage src{}, dst{};
  socklen_t len = 0;
  int family = AF_INET;
};

Endpoints endpoints(const TraceTarget& t) {
  Endpoints e;
  if (v4_mapped(t.source.data()) && v4_mapped(t.dest.data())) {
    e.family = AF_INET;
    e.len = sizeof(sockaddr_in);
    auto* s = reinterpret_cast<sockaddr_in*>(&e.src);
    auto* d = reinterpret_cast<sockaddr_in*>(&e.dst);
    s->sin_family = d->sin_family = AF_INET;
    std::memcpy(&s->sin_addr, t.source.data() + 12, 4);
    std::memcpy(&d->sin_addr, t.dest.data() + 12, 4);
    s->sin_port = htons(t.sport);
    d->sin_port = htons(kRoceV2Port);
  } else {
    e.family = AF_INET6;
    e.len = sizeof(sockaddr_in6);
    auto* s = reinterpret_cast<sockaddr_in6*>(&e.src);
    auto* d = reinterpret_cast<sockaddr_in6*>(&e.dst);
    s->sin6_family = d->sin6_family = AF_INET6;
    std::memcpy(&s->sin6_addr, t.source.data(), 16);
    std::memcpy(&d->sin6_addr, t.dest.data(), 16);
    s->sin6_port = htons(t.sport);
    d->sin6_port = htons(kRoceV2Port);
    // A link-local GID (fe80::/10) is only meaningful on its netdev.
    if (IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr)) s->sin6_scope_id = t.ifindex;
    if (IN6_IS_ADDR_LINKLOCAL(&d->sin6_addr)) d->sin6_scope_id = t.ifindex;
  }
  return e;
}

// Ties the socket to the netdev: SO_BINDTODEVICE (unprivileged since Linux 5.7 on an unbound
// socket), else IP_UNICAST_IF / IPV6_UNICAST_IF, which only choose the egress of unicast.
std::string bind_device(int fd, int family, unsigned ifindex, int& err) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(ifindex, name) && setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, name, static_cast<socklen_t>(std::strlen(name))) == 0)
    return "bindtodevice";
  if (family == AF_INET) {
    const std::uint32_t idx = htonl(ifindex);  // IP_UNICAST_IF: network byte order (ip(7))
    if (setsockopt(fd, IPPROTO_IP, IP_UNICAST_IF, &idx, sizeof(idx)) == 0) return "unicast_if";
  } else {
    const int idx = static_cast<int>(ifindex);
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_IF, &idx, sizeof(idx)) == 0) return "unicast_if";
  }
  err = errno;
  return "";
}

struct Setup {
  Fd fd;
  std::string failure, binding;
};

Setup open_socket(const TraceTarget& t, const Endpoints& e) {
  Setup s;
  s.fd = Fd(::socket(e.family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.fd.fd < 0) {
    s.failure = setup_failure(errno);
    return s;
  }
  const int fd = s.fd.fd, on = 1, tos = t.tos;
  int err = 0;
  if (t.ifindex) {
    s.binding = bind_device(fd, e.family, t.ifindex, err);
    if (s.binding.empty()) {
      s.failure = setup_failure(err);
      return s;
    }
  }
  const bool v4 = e.family == AF_INET;
  const bool ok = v4 ? setsockopt(fd, IPPROTO_IP, IP_RECVERR, &on, sizeof(on)) == 0 &&
                           setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) == 0
                     : setsockopt(fd, IPPROTO_IPV6, IPV6_RECVERR, &on, sizeof(on)) == 0 &&
                           setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos)) == 0;
  if (!ok) {
    s.failure = setup_failure(errno);
    return s;
  }
  // No SO_REUSEADDR: a source port another socket holds stays its own (its datagrams too).
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&e.src), e.len) != 0) {
    s.failure = setup_failure(errno);
    return s;
  }
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&e.dst), e.len) != 0) {
    s.failure = errno == ENETUNREACH || errno == EHOSTUNREACH ? "no_route" : setup_failure(errno);
    return s;
  }
  return s;
}

bool set_ttl(int fd, int family, int ttl) {
  return family == AF_INET ? setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)) == 0
                           : setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof(ttl)) == 0;
}

// The errors an ICMP answer leaves pending on the socket (sk_err): the next send reports them
// once. They are answers read from the error queue, not a failed send.
bool pending_icmp_error(int err) {
  return err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNREFUSED || err == EPROTO || err == EHOSTDOWN ||
         err == ENOPROTOOPT || err == EACCES || err == EMSGSIZE;
}

bool send_packet(int fd, const std::array<std::uint8_t, kTracePacketSize>& p) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (::send(fd, p.data(), p.size(), 0) == static_cast<ssize_t>(p.size())) return true;
    if (!pending_icmp_error(errno) && errno != EINTR) return false;
  }
  return false;
}

struct Answer {
  HopAnswer hop;
  bool icmp = false;      // an ICMP answer (else another error-queue entry: ignored)
  std::uint32_t ttl = 0;  // from the quoted packet; 0: the router quoted too little of it
};

// One error-queue message, or nullopt when the queue is empty.
std::optional<Answer> read_error(int fd, std::uint32_t dest_qpn) {
  std::uint8_t payload[256];
  alignas(cmsghdr) std::uint8_t control[512];
  sockaddr_storage from{};
  iovec iov{payload, sizeof(payload)};
  msghdr m{};
  m.msg_name = &from;
  m.msg_namelen = sizeof(from);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
  if (n < 0) return std::nullopt;
  Answer a;
  auto hop = decode_error_queue({control, std::min<std::size_t>(m.msg_controllen, sizeof(control))});
  if (!hop) return a;  // an entry that is no ICMP answer: ignored
  a.hop = *hop;
  // A local error (SO_EE_ORIGIN_LOCAL: no sender address) is no hop's answer.
  a.icmp = hop->kind != HopAnswer::Kind::kOther || !hop->from.empty();
  if (auto f = parse_trace_packet({payload, static_cast<std::size_t>(std::max<ssize_t>(0, n))})) {
    if (f->dest_qpn != dest_qpn) a.icmp = false;  // not a packet of this trace
    a.ttl = f->seq;
  }
  return a;
}

}  // namespace

TraceOutcome SocketPathTracer::trace(const TraceTarget& t, const TraceOptions& o, const TracePacer& pace) {
  TraceOutcome out;
  const Endpoints e = endpoints(t);
  Setup s = open_socket(t, e);
  out.device_binding = s.binding;
  if (!s.failure.empty()) {
    out.failure = s.failure;
    return out;
  }
  const std::string dest = gid_address(t.dest);
  const unsigned max_hops = std::clamp(o.max_hops, 1u, 64u);
  // Once the distance is known the destination is not sent to again: it is appended.
  const unsigned last_ttl = o.distance > 1 ? std::min<unsigned>(max_hops, static_cast<unsigned>(o.distance - 1)) : max_hops;
  std::vector<std::string> answers(last_ttl);  // "" = no answer (hop_list makes it "*")
  std::vector<bool> got(last_ttl, false);
  bool reached = false, unreachable = false;
  out.distance = o.distance;
  // An answer whose quote is too short to name its TTL (RFC 792 asks for 8 bytes past the IP
  // header: the UDP header only) is the current TTL's: one TTL is outstanding at a time, so only
  // a late answer of an earlier, timed-out TTL could be misread so.
  unsigned current = 0;
  auto take = [&](Answer a) {
    if (!a.icmp) return;
    if (a.ttl == 0) a.ttl = current;
    if (a.ttl == 0 || a.ttl > last_ttl) return;
    ++out.answers;
    if (!got[a.ttl - 1]) got[a.ttl - 1] = true, answers[a.ttl - 1] = a.hop.from;
    if (a.hop.from == dest) {
      reached = true;
      if (!out.distance || a.ttl < out.distance) out.distance = a.ttl;
    } else if (a.hop.kind == HopAnswer::Kind::kUnreachable) {
      unreachable = true;
    }
  };
  unsigned silent = 0, sent_ttl = 0;
  for (unsigned ttl = 1; ttl <= last_ttl && !reached && !unreachable; ++ttl) {
    if (!pace()) {
      out.failure = "stopped";
      return out;
    }
    if (!set_ttl(s.fd.fd, e.family, static_cast<int>(ttl)) || !send_packet(s.fd.fd, build_trace_packet(t.dest_qpn, ttl))) {
      out.failure = setup_failure(errno);
      break;
    }
    ++out.packets;
    sent_ttl = current = ttl;
    const auto deadline = Clock::now() + o.hop_timeout;
    while (!got[ttl - 1] && !reached && !unreachable) {
      while (auto a = read_error(s.fd.fd, t.dest_qpn)) take(*a);
      if (got[ttl - 1] || reached || unreachable) break;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      pollfd p{s.fd.fd, POLLERR, 0};  // the error queue wakes poll with POLLERR
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR) break;
    }
    silent = got[ttl - 1] ? 0 : silent + 1;
    if (silent >= std::max(1u, o.stop_after_silent)) break;
  }
  while (auto a = read_error(s.fd.fd, t.dest_qpn)) take(*a);  // late answers already queued
  answers.resize(sent_ttl);
  if (reached) {
    // The hop list ends at the destination's answer; later TTLs, if any answered, are dropped.
    answers.resize(out.distance);
    answers.back() = dest;
  }
  out.hops = hop_list(answers, reached ? 0 : out.distance, dest);
  out.complete = reached || (!out.hops.empty() && out.hops.back() == dest);
  if (out.failure.empty() && out.answers == 0) out.failure = "no_answer";
  return out;
}

}  // namespace rdma::collectors::prober
