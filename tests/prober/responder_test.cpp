// The real Responder on loopback, with no RDMA device: a port table request (challenge, request,
// table) is a complete handshake through its event loop. What is held against it: idle
// connections that never send a byte, floods from one source address and from many source
// prefixes that re-open every connection the responder closes, connections past their deadline.
// 127.0.0.0/8 is on the loopback interface: every address of it is a source address of this
// host. The IPv6 /64 case runs in a network namespace (netns_responder.sh adds the addresses).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/verbs/responder.h"
#include "collectors/prober/verbs/verbs_transport.h"

using namespace rdma::collectors::prober;
using namespace std::chrono_literals;

namespace {

TransportOptions options() {
  TransportOptions o;
  o.listen = {"127.0.0.1", 0};
  o.node_name = "responder-under-test";
  // Longer than any test: an idle connection stays held throughout, unless replaced.
  o.handshake_timeout = 60s;
  o.responder_pending_timeout = 60s;
  return o;
}

// A socket address for numeric `address` (IPv4 or IPv6) and `port`; 0 when it is not one.
socklen_t sockaddr_of(const std::string& address, std::uint16_t port, sockaddr_storage& ss) {
  ss = {};
  if (address.find(':') == std::string::npos) {
    auto& s4 = reinterpret_cast<sockaddr_in&>(ss);
    s4.sin_family = AF_INET;
    s4.sin_port = htons(port);
    return inet_pton(AF_INET, address.c_str(), &s4.sin_addr) == 1 ? sizeof s4 : 0;
  }
  auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
  s6.sin6_family = AF_INET6;
  s6.sin6_port = htons(port);
  return inet_pton(AF_INET6, address.c_str(), &s6.sin6_addr) == 1 ? sizeof s6 : 0;
}

// A TCP socket bound to `source`, connecting to `dest`:`port` (blocking unless `nonblocking`:
// then the connect may still be in progress); an invalid Fd when that fails. No Catch2 macros:
// the flood's thread calls it.
Fd try_connection(std::uint16_t port, const std::string& source, const std::string& dest, bool nonblocking) {
  sockaddr_storage from{}, to{};
  const socklen_t fl = sockaddr_of(source, 0, from), tl = sockaddr_of(dest, port, to);
  if (!fl || !tl) return Fd{};
  Fd s(::socket(to.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0));
  if (s.fd < 0 || ::bind(s.fd, reinterpret_cast<sockaddr*>(&from), fl) != 0) return Fd{};
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&to), tl) != 0 && !(nonblocking && errno == EINPROGRESS)) return Fd{};
  return s;
}

Fd connection(std::uint16_t port, const std::string& source, const std::string& dest = "127.0.0.1", bool nonblocking = false) {
  Fd s = try_connection(port, source, dest, nonblocking);
  INFO("connect from " << source << " to " << dest << ": " << std::strerror(errno));
  REQUIRE(s.fd >= 0);
  return s;
}

// A TCP connection from `source` that sends nothing.
Fd idle_connection(std::uint16_t port, const char* source = "127.0.0.1") { return connection(port, source); }

// What the responder did with a connection: sent its challenge (held) or closed it, waiting at
// most 10 s for either (bounded; the answer normally comes in microseconds).
enum class Fate { kHeld, kClosed, kNothing };
Fate fate(int fd) {
  std::uint8_t b[kHeaderSize];
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) <= 0) return Fate::kNothing;
  ssize_t k = ::recv(fd, b, sizeof b, MSG_PEEK);
  return k > 0 ? Fate::kHeld : Fate::kClosed;
}
// Still open, without waiting: nothing to read but the challenge, no hang-up.
bool still_open(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return false;
  if (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) return false;
  return true;
}

// A port table exchange as the prober's pairing does it, to `address`, within `limit` (the
// prober's connect_timeout: what a real peer waits); its duration in seconds (-1: failed).
double port_table_handshake(std::uint16_t port, const std::string& address = "127.0.0.1",
                            std::chrono::milliseconds limit = 30s) {
  const auto start = std::chrono::steady_clock::now();
  const Deadline d = start + limit;
  std::string why;
  Nonce server{};
  Fd s = open_handshake(address, port, "", d, server, why);
  if (s.fd < 0) return -1;
  const PortRequest req{random_nonce()};
  if (!send_frame(s.fd, encode_frame(req, "", server), d)) return -1;
  auto bytes = read_frame(s.fd, d, why);
  if (!bytes) return -1;
  auto table = decode_frame(*bytes, "", req.nonce);
  if (table.status != DecodeStatus::kOk || !std::holds_alternative<PortTable>(*table.message)) return -1;
  if (std::get<PortTable>(*table.message).name != "responder-under-test") return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The responder counts a result after its last send: the client may read it first. Waits up to
// 10 s (bounded) for `pred`.
template <class P>
bool eventually(P pred) {
  for (int i = 0; i < 10000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

// The attack: `per_source` connections from each source address, never sending a byte, each one
// the responder closes opened again at once. A thread of its own until stop().
class Flood {
 public:
  Flood(std::uint16_t port, std::vector<std::string> sources, std::size_t per_source, std::string dest = "127.0.0.1")
      : port_(port), dest_(std::move(dest)), sources_(std::move(sources)) {
    for (std::size_t i = 0; i < sources_.size() * per_source; ++i)
      conns_.push_back({connection(port_, sources_[i % sources_.size()], dest_, true), i % sources_.size()});
    thread_ = std::thread([this] { run(); });
  }
  ~Flood() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::uint64_t reopened() const { return reopened_.load(); }

 private:
  struct Conn {
    Fd fd;
    std::size_t source;
  };
  void run() {
    std::vector<pollfd> pfds;
    std::uint8_t buf[4096];
    while (!stop_) {
      pfds.clear();
      for (const auto& c : conns_) pfds.push_back({c.fd.fd, POLLIN, 0});  // a failed one (-1): skipped
      ::poll(pfds.data(), pfds.size(), 10);
      for (std::size_t i = 0; i < conns_.size(); ++i) {
        if (conns_[i].fd.fd >= 0) {
          if (!pfds[i].revents) continue;
          const ssize_t k = ::recv(conns_[i].fd.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (k > 0 || (k < 0 && (errno == EAGAIN || errno == EINTR))) continue;  // the challenge: held
        }
        // Closed (or reset) by the responder, or not open: open another from the same address.
        conns_[i].fd = Fd();
        conns_[i].fd = try_connection(port_, sources_[conns_[i].source], dest_, true);
        ++reopened_;
      }
    }
  }
  const std::uint16_t port_;
  const std::string dest_;
  const std::vector<std::string> sources_;
  std::vector<Conn> conns_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> reopened_{0};
  std::thread thread_;
};

// Hundreds of sockets: the soft descriptor limit up to the hard one.
void raise_fd_limit() {
  rlimit l{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &l) == 0);
  l.rlim_cur = l.rlim_max;
  setrlimit(RLIMIT_NOFILE, &l);
}

// The flood against `r` from `sources`, and meanwhile `attempts` real peer handshakes to
// `address` (the prober's connect_timeout each): how many completed. Checks that the flood held
// the table full and re-opened what the responder closed.
std::size_t handshakes_under_flood(Responder& r, const std::vector<std::string>& sources, const std::string& address,
                                   std::size_t attempts, const char* what) {
  Flood flood(r.port(), sources, 8, address);
  // Held: the table is full (with more than 16 addresses, the flood re-opens what it replaces of
  // itself meanwhile).
  REQUIRE(eventually([&] { return r.pending() >= 128; }));
  std::size_t ok = 0;
  double slowest = 0;
  for (std::size_t i = 0; i < attempts; ++i) {
    // Each attempt meets a full table: the flood has re-opened what the last one replaced (its
    // thread's pace is the machine's, so without this a loaded host hands the peer a free slot).
    REQUIRE(eventually([&] { return r.pending() >= 128; }));
    const double t = port_table_handshake(r.port(), address, 5s);
    if (t >= 0) ++ok, slowest = std::max(slowest, t);
  }
  const bool refilled = eventually([&] { return flood.reopened() >= attempts; });
  const auto evicted = r.evicted();
  std::printf("responder: %s (%zu addresses x 8 pending, re-opened %llu times, evicted pending_total %llu): "
              "%zu of %zu real peer handshakes accepted, slowest %.4f s\n",
              what, sources.size(), static_cast<unsigned long long>(flood.reopened()),
              static_cast<unsigned long long>(evicted.count("pending_total") ? evicted.at("pending_total") : 0), ok, attempts,
              slowest);
  CHECK(refilled);  // each real handshake replaced one of the flood's, at least, and it came back
  CHECK(evicted.count("pending_total"));
  CHECK(r.refused().empty());
  return ok;
}

}  // namespace

TEST_CASE("a real handshake completes while 0, 3 or 64 idle connections are held open to the responder") {
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  for (std::size_t idle : {0, 3, 64}) {
    auto o = options();
    o.responder_max_pending_per_source = 100;  // every idle one is from 127.0.0.1: all held
    Responder r(o, 1, no_devices);
    r.start();
    std::vector<Fd> held;
    for (std::size_t i = 0; i < idle; ++i) held.push_back(idle_connection(r.port()));
    for (auto& h : held) REQUIRE(fate(h.fd) == Fate::kHeld);  // each got its challenge: pending now
    double times[5];
    for (double& t : times) {
      t = port_table_handshake(r.port());
      REQUIRE(t >= 0);
    }
    // Done while every idle connection is still held (not after the responder gave up on them).
    for (auto& h : held) CHECK(still_open(h.fd));
    CHECK(eventually([&] { return r.pending() == idle; }));
    std::sort(std::begin(times), std::end(times));
    std::printf("responder: port table handshake with %zu idle connections held: median %.6f s (min %.6f, max %.6f)\n", idle,
                times[2], times[0], times[4]);
    CHECK(eventually([&] { return r.handshakes()["port_table"] == 5; }));
    CHECK(r.up());
    r.stop();
    CHECK(!r.up());
  }
}

namespace {
// The responder closed `fd` after its challenge: the challenge, then the end of the stream
// (waiting at most 10 s, bounded).
bool replaced(int fd) {
  std::uint8_t b[256];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return false;
    const ssize_t k = ::recv(fd, b, sizeof b, 0);
    if (k <= 0) return k == 0 || errno == ECONNRESET;
  }
}
}  // namespace

TEST_CASE("beyond its pending bounds the responder replaces the oldest connection, and others still get through") {
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  auto o = options();
  o.responder_max_pending_per_source = 8;
  o.responder_max_pending = 12;
  Responder r(o, 1, no_devices);
  r.start();
  // 40 from one address: each beyond 8 replaces that address's oldest; the newest 8 stay.
  std::vector<Fd> flood;
  for (int i = 0; i < 40; ++i) {
    flood.push_back(idle_connection(r.port(), "127.0.0.1"));
    REQUIRE(fate(flood.back().fd) == Fate::kHeld);  // in order: each accepted before the next
  }
  for (int i = 0; i < 32; ++i) CHECK(replaced(flood[static_cast<std::size_t>(i)].fd));
  for (int i = 32; i < 40; ++i) CHECK(still_open(flood[static_cast<std::size_t>(i)].fd));
  CHECK(eventually([&] { return r.evicted()["pending_per_source"] == 32 && r.pending() == 8; }));
  // Another /24: it gets in whole (6), the full table (12) giving up the busiest prefix's
  // oldest connections (2 of the flood's), never the newcomer.
  std::vector<Fd> other;
  for (int i = 0; i < 6; ++i) {
    other.push_back(idle_connection(r.port(), "127.0.1.2"));
    REQUIRE(fate(other.back().fd) == Fate::kHeld);
  }
  CHECK(eventually([&] { return r.evicted()["pending_total"] == 2 && r.pending() == 12; }));
  CHECK(replaced(flood[32].fd));
  CHECK(replaced(flood[33].fd));
  for (int i = 34; i < 40; ++i) CHECK(still_open(flood[static_cast<std::size_t>(i)].fd));
  for (auto& f : other) CHECK(still_open(f.fd));
  // A real handshake, from the flooding address itself, gets through at once (replacing the
  // flood's oldest: that prefix is the busiest).
  CHECK(port_table_handshake(r.port(), "127.0.0.1", 5s) >= 0);
  CHECK(r.refused().empty());
  r.stop();
}

TEST_CASE("real peer handshakes are accepted while 16 or 64 addresses of as many /24s hold and re-open pending connections") {
  raise_fd_limit();
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  for (int n : {16, 64}) {
    const auto o = options();  // the defaults: 128 pending, 8 per address (it outlives the responder)
    Responder r(o, 1, no_devices);
    r.start();
    std::vector<std::string> sources;
    for (int i = 1; i <= n; ++i) sources.push_back("127.1." + std::to_string(i) + ".1");  // one /24 each
    // The real peer connects from 127.0.0.1: its own /24.
    const std::size_t ok = handshakes_under_flood(r, sources, "127.0.0.1", 40, n == 16 ? "16 sources" : "64 sources");
    CHECK(ok == 40);
    CHECK(r.up());
    r.stop();
  }
}

TEST_CASE("the addresses of one /24 count as one prefix, IPv4-mapped on a dual-stack socket too") {
  raise_fd_limit();
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  auto o = options();
  o.listen = {"", 0};  // any address, dual-stack: IPv4 peers arrive as ::ffff:a.b.c.d
  Responder r(o, 1, no_devices);
  r.start();
  std::vector<std::string> sources;
  for (int i = 1; i <= 64; ++i) sources.push_back("127.2.0." + std::to_string(i));
  const std::size_t ok = handshakes_under_flood(r, sources, "127.0.0.1", 40, "64 sources in one /24, dual-stack");
  CHECK(ok == 40);
  // A second /24 holds its 8 (one address's bound) beside the flood's 512 wanting in: one prefix
  // against one prefix. Were each of the flood's addresses a prefix of its own, these 8 would be
  // the busiest and replace each other.
  Flood flood(r.port(), sources, 8);
  REQUIRE(eventually([&] { return r.pending() >= 128 && flood.reopened() >= 64; }));
  std::vector<Fd> other;
  for (int i = 0; i < 8; ++i) {
    other.push_back(idle_connection(r.port(), "127.3.0.1"));
    REQUIRE(fate(other.back().fd) == Fate::kHeld);
  }
  const auto seen = flood.reopened();
  REQUIRE(eventually([&] { return flood.reopened() >= seen + 1000; }));  // the flood goes on meanwhile
  for (auto& f : other) CHECK(still_open(f.fd));
  r.stop();
}

// netns_responder.sh runs this in a network namespace of its own where lo holds fd00:5a:1:2::1 to
// ::40 (the flood's /64), fd00:5a:1:3::1 (a second /64) and fd00:5a:1:4::1 (the responder's).
TEST_CASE("real peer handshakes are accepted while 64 addresses of one IPv6 /64 hold and re-open pending connections", "[.netns]") {
  raise_fd_limit();
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  auto o = options();
  o.listen = {"fd00:5a:1:4::1", 0};
  Responder r(o, 1, no_devices);
  r.start();
  std::vector<std::string> sources;
  char hex[8];
  for (int i = 1; i <= 64; ++i) {
    std::snprintf(hex, sizeof hex, "%x", i);
    sources.push_back(std::string("fd00:5a:1:2::") + hex);
  }
  const std::size_t ok = handshakes_under_flood(r, sources, "fd00:5a:1:4::1", 40, "64 sources in one /64");
  CHECK(ok == 40);
  Flood flood(r.port(), sources, 8, "fd00:5a:1:4::1");
  REQUIRE(eventually([&] { return r.pending() >= 128 && flood.reopened() >= 64; }));
  std::vector<Fd> other;
  for (int i = 0; i < 8; ++i) {
    other.push_back(connection(r.port(), "fd00:5a:1:3::1", "fd00:5a:1:4::1"));
    REQUIRE(fate(other.back().fd) == Fate::kHeld);
  }
  const auto seen = flood.reopened();
  REQUIRE(eventually([&] { return flood.reopened() >= seen + 1000; }));
  for (auto& f : other) CHECK(still_open(f.fd));
  r.stop();
}

TEST_CASE("a pending connection that sends nothing is closed at its own deadline") {
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  auto o = options();
  // responder_pending_timeout, far below the handshake timeout (connect_timeout) a real peer has.
  o.responder_pending_timeout = 200ms;
  Responder r(o, 1, no_devices);
  r.start();
  Fd silent = idle_connection(r.port());
  REQUIRE(fate(silent.fd) == Fate::kHeld);
  // The challenge, then the close once its deadline passed (bounded wait).
  std::uint8_t b[256];
  REQUIRE(::recv(silent.fd, b, kHeaderSize, MSG_WAITALL) == static_cast<ssize_t>(kHeaderSize));
  pollfd p{silent.fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 10000) == 1);
  ssize_t rest = ::recv(silent.fd, b, sizeof b, 0);
  while (rest > 0) rest = ::recv(silent.fd, b, sizeof b, 0);  // the challenge's body
  CHECK(rest == 0);
  CHECK(eventually([&] { return r.handshakes()["timeout"] == 1 && r.pending() == 0; }));
  r.stop();
}

TEST_CASE("handshake connections get TCP keepalive and a user timeout within the configured bound") {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  set_keepalive(s.fd, 60s);
  int on = 0, idle = 0, interval = 0, count = 0;
  unsigned user = 0;
  socklen_t l = sizeof on;
  getsockopt(s.fd, SOL_SOCKET, SO_KEEPALIVE, &on, &l);
  getsockopt(s.fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &l);
  getsockopt(s.fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, &l);
  getsockopt(s.fd, IPPROTO_TCP, TCP_KEEPCNT, &count, &l);
  l = sizeof user;
  getsockopt(s.fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, &l);
  CHECK(on == 1);
  CHECK(idle == 15);
  CHECK(interval == 5);
  CHECK(user == 60000u);
  CHECK(idle + interval * count >= 60);  // the probes outlast the user timeout, which ends it at 60 s
}
