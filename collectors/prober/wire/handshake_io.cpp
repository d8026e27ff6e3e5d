#include "collectors/prober/wire/handshake_io.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rdma::collectors::prober {

namespace {
int ms_left(Deadline d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d - std::chrono::steady_clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

bool io_all(int fd, std::uint8_t* p, std::size_t n, Deadline d, bool write) {
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    int r = ::poll(&pfd, 1, ms_left(d));
    if (r <= 0) return false;
    ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}
}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd >= 0) ::close(fd);
    fd = std::exchange(o.fd, -1);
  }
  return *this;
}

Fd::~Fd() {
  if (fd >= 0) ::close(fd);
}

std::optional<std::vector<std::uint8_t>> read_frame(int fd, Deadline d, std::string& why) {
  std::vector<std::uint8_t> b(kHeaderSize);
  if (!io_all(fd, b.data(), b.size(), d, false)) return why = "handshake_io", std::nullopt;
  auto size = frame_size(b);
  if (!size) return why = "handshake_bad_header", std::nullopt;
  b.resize(*size);
  if (!io_all(fd, b.data() + kHeaderSize, *size - kHeaderSize, d, false)) return why = "handshake_io", std::nullopt;
  return b;
}

Fd open_handshake(const std::string& address, std::uint16_t port, std::string_view secret, Deadline d, Nonce& server_nonce,
                  std::string& why) {
  Fd s = tcp_connect(address, port, d, why);
  if (s.fd < 0) return s;
  auto bytes = read_frame(s.fd, d, why);
  if (!bytes) return Fd{};
  auto ch = decode_frame(*bytes, secret, {});
  if (ch.status != DecodeStatus::kOk || !std::holds_alternative<Challenge>(*ch.message)) {
    why = "handshake_" + std::string(decode_status_label(ch.status == DecodeStatus::kOk ? DecodeStatus::kBadType : ch.status));
    return Fd{};
  }
  server_nonce = std::get<Challenge>(*ch.message).nonce;
  return s;
}

bool send_frame(int fd, const std::vector<std::uint8_t>& f, Deadline d) {
  auto copy = f;
  return io_all(fd, copy.data(), copy.size(), d, true);
}

Fd tcp_connect(const std::string& address, std::uint16_t port, Deadline deadline, std::string& why) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (address.find(':') == std::string::npos) {
    auto& s4 = reinterpret_cast<sockaddr_in&>(ss);
    s4.sin_family = AF_INET;
    s4.sin_port = htons(port);
    if (inet_pton(AF_INET, address.c_str(), &s4.sin_addr) != 1) return why = "bad_address", Fd{};
    len = sizeof s4;
  } else {
    auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(port);
    if (inet_pton(AF_INET6, address.c_str(), &s6.sin6_addr) != 1) return why = "bad_address", Fd{};
    len = sizeof s6;
  }
  Fd s(socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return why = "connect", Fd{};
  int one = 1;
  setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (errno != EINPROGRESS) return why = "connect", Fd{};
    pollfd pfd{s.fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (::poll(&pfd, 1, ms_left(deadline)) <= 0 || getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
      return why = "connect", Fd{};
  }
  return s;
}

namespace {
// The accept queue of the responder's socket (the kernel caps it at net.core.somaxconn, 4096 by
// default): connections of a flood wait there, not as dropped SYNs that a real peer's SYN would
// share the fate of (its retry: 1 s, then 3 s). The responder takes every one of them in and
// closes the busiest prefix's oldest (pending_admission.h), so a real peer's connection waits
// behind at most this many others, accepted in batches within milliseconds.
constexpr int kListenBacklog = 4096;

// Fills `ss` for `host` (numeric; empty: the family's any address). False for a bad address.
bool listen_address(const std::string& host, int family, std::uint16_t port, sockaddr_storage& ss, socklen_t& len) {
  ss = {};
  if (family == AF_INET6) {
    auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(port);
    s6.sin6_addr = in6addr_any;
    len = sizeof s6;
    return host.empty() || inet_pton(AF_INET6, host.c_str(), &s6.sin6_addr) == 1;
  }
  auto& s4 = reinterpret_cast<sockaddr_in&>(ss);
  s4.sin_family = AF_INET;
  s4.sin_port = htons(port);
  s4.sin_addr.s_addr = htonl(INADDR_ANY);
  len = sizeof s4;
  return host.empty() || inet_pton(AF_INET, host.c_str(), &s4.sin_addr) == 1;
}
}  // namespace

Fd listen_socket(const HostPort& at, int (*make_socket)(int, int, int)) {
  const std::string& host = at.host;
  // Any address: one dual-stack IPv6 socket (IPV6_V6ONLY off) where the kernel has IPv6, else
  // IPv4 only (a kernel booted with ipv6.disable=1 has no AF_INET6 sockets at all).
  int family = host.empty() || host.find(':') != std::string::npos ? AF_INET6 : AF_INET;
  Fd s(make_socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd < 0 && host.empty() && errno == EAFNOSUPPORT) {
    family = AF_INET;
    s = Fd(make_socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  }
  const int socket_errno = errno;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!listen_address(host, family, at.port, ss, len)) throw std::runtime_error("bad listen address " + host);
  auto fail = [&](int err) {
    return std::runtime_error("cannot listen on " + (host.empty() ? std::string("*") : host) + ":" +
                              std::to_string(at.port) + ": " + std::strerror(err));
  };
  if (s.fd < 0) throw fail(socket_errno);
  int one = 1, zero = 0;
  setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6 && host.empty()) setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(s.fd, kListenBacklog) != 0) throw fail(errno);
  return s;
}

void set_keepalive(int fd, std::chrono::milliseconds bound) {
  if (bound.count() <= 0) return;
  const int secs = static_cast<int>(std::max<std::int64_t>(4, std::chrono::duration_cast<std::chrono::seconds>(bound).count()));
  const int one = 1, idle = std::max(1, secs / 4), interval = std::max(1, secs / 12), probes = 9;
  const unsigned user_timeout = static_cast<unsigned>(secs) * 1000u;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

std::vector<Gid> source_gids_for(const std::string& peer) {
  std::vector<Gid> out;
  sockaddr_storage to{};
  socklen_t len = 0;
  const bool v6 = peer.find(':') != std::string::npos;
  if (!listen_address(peer, v6 ? AF_INET6 : AF_INET, 4791, to, len) || peer.empty()) return out;
  if (Fd s(::socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)); s.fd >= 0 &&
      ::connect(s.fd, reinterpret_cast<const sockaddr*>(&to), len) == 0) {
    sockaddr_storage from{};
    socklen_t fl = sizeof from;
    if (getsockname(s.fd, reinterpret_cast<sockaddr*>(&from), &fl) == 0)
      if (auto g = address_gid(from)) out.push_back(*g);
  }
  const auto target = address_gid(to);
  if (!target) return out;
  for (const auto& a : interface_addresses()) {
    if (v4_mapped(a.address.data()) == v6) continue;
    bool same = true;
    for (int k = v6 ? 0 : 12; k < 16; ++k) same = same && ((a.address[k] ^ (*target)[k]) & a.mask[k]) == 0;
    if (same && std::find(out.begin(), out.end(), a.address) == out.end()) out.push_back(a.address);
  }
  return out;
}

std::vector<InterfaceAddress> interface_addresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  for (auto* i = ifa; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || !i->ifa_name) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const std::size_t size = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    sockaddr_storage a{}, m{};
    std::memcpy(&a, i->ifa_addr, size);
    std::memcpy(&m, i->ifa_netmask, size);
    m.ss_family = static_cast<sa_family_t>(family);  // some kernels leave the netmask's family 0
    const auto ga = address_gid(a), gm = address_gid(m);
    if (!ga || !gm) continue;
    unsigned bits = 0;
    for (int k = family == AF_INET6 ? 0 : 12; k < 16; ++k) bits += static_cast<unsigned>(__builtin_popcount((*gm)[k]));
    out.push_back({i->ifa_name, *ga, *gm, static_cast<std::uint8_t>(bits)});
  }
  freeifaddrs(ifa);
  return out;
}

bool v4_mapped(const std::uint8_t* g) {
  static const std::uint8_t p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, p, 12) == 0;
}

std::string gid_address(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4_mapped(gid.data())) inet_ntop(AF_INET, gid.data() + 12, buf, sizeof buf);
  else inet_ntop(AF_INET6, gid.data(), buf, sizeof buf);
  return buf;
}

std::optional<Gid> address_gid(const std::string& numeric) {
  Gid g{};
  if (inet_pton(AF_INET, numeric.c_str(), g.data() + 12) == 1) {
    g[10] = g[11] = 0xff;
    return g;
  }
  if (inet_pton(AF_INET6, numeric.c_str(), g.data()) == 1) return g;
  return std::nullopt;
}

std::optional<Gid> address_gid(const sockaddr_storage& ss) {
  Gid g{};
  if (ss.ss_family == AF_INET) {
    g[10] = g[11] = 0xff;
    std::memcpy(g.data() + 12, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, 4);
    return g;
  }
  if (ss.ss_family == AF_INET6) {
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, 16);
    return g;
  }
  return std::nullopt;
}

}  // namespace rdma::collectors::prober
