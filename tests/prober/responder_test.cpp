// The real Responder on loopback, with no RDMA device: a port table request (challenge, request,
// table) is a complete handshake through its event loop. What is held against it: idle
// connections that never send a byte, a flood from one source address, connections past their
// deadline. 127.0.0.2 is a second source address on the loopback interface.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

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
  o.handshake_timeout = 60s;  // longer than any test: an idle connection stays held throughout
  return o;
}

// A TCP connection from `source` that sends nothing.
Fd idle_connection(std::uint16_t port, const char* source = "127.0.0.1") {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  REQUIRE(::bind(s.fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  REQUIRE(::connect(s.fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  return s;
}

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

// A port table exchange as the prober's pairing does it; its duration in seconds (-1: failed).
double port_table_handshake(std::uint16_t port) {
  const auto start = std::chrono::steady_clock::now();
  const Deadline d = start + 30s;
  std::string why;
  Nonce server{};
  Fd s = open_handshake("127.0.0.1", port, "", d, server, why);
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

TEST_CASE("the responder caps pending connections per source and in total, and others still get through") {
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  auto o = options();
  o.responder_max_pending_per_source = 8;
  o.responder_max_pending = 12;
  Responder r(o, 1, no_devices);
  r.start();
  std::vector<Fd> flood;
  for (int i = 0; i < 40; ++i) flood.push_back(idle_connection(r.port(), "127.0.0.1"));
  std::size_t held = 0, closed = 0;
  for (auto& f : flood) (fate(f.fd) == Fate::kHeld ? held : closed)++;
  CHECK(held == 8);
  CHECK(closed == 32);
  CHECK(r.refused().at("pending_per_source") == 32);
  // Another source still gets its share, up to the total bound (12 = 8 + 4).
  std::vector<Fd> other;
  for (int i = 0; i < 6; ++i) other.push_back(idle_connection(r.port(), "127.0.0.2"));
  std::size_t other_held = 0;
  for (auto& f : other) other_held += fate(f.fd) == Fate::kHeld;
  CHECK(other_held == 4);
  CHECK(r.refused().at("pending_total") == 2);
  // A real handshake from the flooding address waits for nothing: once one of its idle
  // connections is given back, it gets through while the rest of the flood is held.
  for (auto it = flood.begin(); it != flood.end(); ++it)
    if (fate(it->fd) == Fate::kHeld) {
      flood.erase(it);
      break;
    }
  double t = -1;
  for (int tries = 0; tries < 100 && t < 0; ++tries) {
    t = port_table_handshake(r.port());
    if (t < 0) std::this_thread::sleep_for(10ms);  // until the responder saw the close
  }
  CHECK(t >= 0);
  for (auto& f : flood)
    if (fate(f.fd) == Fate::kHeld) CHECK(still_open(f.fd));
  r.stop();
}

TEST_CASE("a pending connection that sends nothing is closed at its own deadline") {
  const std::vector<std::unique_ptr<ProbeDevice>> no_devices;
  auto o = options();
  o.handshake_timeout = 200ms;
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
