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

struct Read {
  HopAnswer hop;
  AnswerCheck check;
};

// One error-queue message, or nullopt when the queue is empty. `sent_ttl`: the highest TTL sent.
std::optional<Read> read_error(int fd, std::uint32_t dest_qpn, std::uint32_t sent_ttl) {
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
  Read r;
  if (auto hop = decode_error_queue({control, std::min<std::size_t>(m.msg_controllen, sizeof(control))})) r.hop = *hop;
  // The payload is what the answer quotes past the UDP header (at most the buffer: more is not looked at).
  r.check = check_answer(r.hop, {payload, static_cast<std::size_t>(std::clamp<ssize_t>(n, 0, sizeof(payload)))}, dest_qpn,
                         sent_ttl);
  return r;
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
  const unsigned max_hops = std::clamp(o.max_hops, 1u, 64u), stop_after = std::max(1u, o.stop_after_silent);
  struct Sent {
    Clock::time_point at, deadline;
  };
  std::vector<Sent> sent;                      // by TTL - 1
  std::vector<std::string> answers(max_hops);  // "" = no answer (hop_list makes it "*")
  std::vector<bool> got(max_hops, false);
  unsigned reached = 0;  // the TTL the destination answered (0: it did not)
  bool unreachable = false;
  Clock::duration max_rtt{};  // of this trace's answers so far
  auto take = [&](const Read& r) {
    const char* why = r.check.reason;
    const unsigned ttl = r.check.ttl;
    if (!*why && got[ttl - 1]) why = "duplicate";
    if (!*why && r.hop.from == dest && r.hop.kind != HopAnswer::Kind::kUnreachable) why = "not_trace";
    if (!*why && reached && ttl > reached) why = "beyond_destination";
    if (*why) {
      ++out.ignored[why];
      return;
    }
    ++out.answers;
    got[ttl - 1] = true;
    answers[ttl - 1] = r.hop.from;
    max_rtt = std::max(max_rtt, Clock::now() - sent[ttl - 1].at);
    if (r.hop.from == dest) reached = reached ? std::min(reached, ttl) : ttl;
    else if (r.hop.kind == HopAnswer::Kind::kUnreachable) unreachable = true;
  };
  // TTLs go out one after another; the next goes when the last one answered or, once an answer
  // of this trace showed the round trip, when the last one has been silent for `gap` (4 round
  // trips, at least hop_timeout / 5, at most hop_timeout): a silent destination or router then
  // costs gap + hop_timeout for its stop_after_silent (2) TTLs together, not a hop_timeout each.
  // At most stop_after_silent TTLs are out unanswered past the last answered one, as when sent
  // one at a time, so the packets are the same, but for one more TTL when an answer that ends the
  // trace comes later than the gap.
  for (;;) {
    while (auto r = read_error(s.fd.fd, t.dest_qpn, static_cast<std::uint32_t>(sent.size()))) take(*r);
    if (reached || unreachable) break;
    const auto now = Clock::now();
    std::size_t last_answered = 0;  // TTL
    for (std::size_t i = 0; i < sent.size(); ++i)
      if (got[i]) last_answered = i + 1;
    std::size_t silent = 0, pending = 0;  // after the last answered TTL: past their deadline, still waited for
    for (std::size_t i = last_answered; i < sent.size(); ++i) (sent[i].deadline <= now ? silent : pending) += 1;
    if (silent >= stop_after) break;
    const Clock::duration timeout = o.hop_timeout;
    const Clock::duration gap =
        max_rtt > Clock::duration::zero() ? std::clamp<Clock::duration>(4 * max_rtt, timeout / 5, timeout) : timeout;
    const bool more = sent.size() < max_hops && silent + pending < stop_after;
    const auto send_at = sent.size() == last_answered ? now : sent.back().at + gap;
    if (more && send_at <= now) {
      if (!pace()) {
        out.failure = "stopped";
        return out;
      }
      const unsigned ttl = static_cast<unsigned>(sent.size()) + 1;
      if (!set_ttl(s.fd.fd, e.family, static_cast<int>(ttl)) || !send_packet(s.fd.fd, build_trace_packet(t.dest_qpn, ttl))) {
        out.failure = setup_failure(errno);
        break;
      }
      ++out.packets;
      const auto at = Clock::now();
      sent.push_back({at, at + o.hop_timeout});
      continue;
    }
    if (!pending) break;  // every TTL sent is answered or silent, and no more may go
    auto wake = Clock::time_point::max();
    for (std::size_t i = last_answered; i < sent.size(); ++i)
      if (sent[i].deadline > now) wake = std::min(wake, sent[i].deadline);
    if (more) wake = std::min(wake, send_at);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    pollfd p{s.fd.fd, POLLERR, 0};  // the error queue wakes poll with POLLERR
    if (::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1000))) < 0 && errno != EINTR) break;
  }
  while (auto r = read_error(s.fd.fd, t.dest_qpn, static_cast<std::uint32_t>(sent.size()))) take(*r);  // already queued
  answers.resize(sent.size());
  if (reached) {
    // The hop list ends at the destination's answer; later TTLs, if any answered, are dropped.
    answers.resize(reached);
    answers.back() = dest;
  }
  out.hops = hop_list(answers);
  out.complete = reached != 0;
  out.distance = reached;
  if (out.failure.empty() && out.answers == 0) out.failure = "no_answer";
  return out;
}

}  // namespace rdma::collectors::prober
