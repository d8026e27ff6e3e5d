#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "collectors/prober/wire/handshake_io.h"

using namespace rdma::collectors::prober;

namespace {
int no_ipv6_socket(int family, int type, int protocol) {
  if (family == AF_INET6) return errno = EAFNOSUPPORT, -1;
  return ::socket(family, type, protocol);
}

sockaddr_storage bound(const Fd& s) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  REQUIRE(getsockname(s.fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0);
  return ss;
}

std::uint16_t port_of(const sockaddr_storage& ss) {
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(ss).sin6_port
                                        : reinterpret_cast<const sockaddr_in&>(ss).sin_port);
}

bool connects(const std::string& address, std::uint16_t port) {
  std::string why;
  return tcp_connect(address, port, std::chrono::steady_clock::now() + std::chrono::seconds(5), why).fd >= 0;
}

bool kernel_has_ipv6() {
  Fd s(::socket(AF_INET6, SOCK_STREAM, 0));
  return s.fd >= 0;
}
}  // namespace

TEST_CASE("listening on any address: dual-stack where the kernel has IPv6, IPv4 otherwise") {
  SECTION("a kernel with IPv6: one IPv6 socket that IPv4 peers reach too") {
    REQUIRE(kernel_has_ipv6());  // the build and CI hosts have it; the vm test covers a host without
    Fd s = listen_socket(HostPort{"", 0});
    const auto ss = bound(s);
    CHECK(ss.ss_family == AF_INET6);
    CHECK(connects("127.0.0.1", port_of(ss)));
  }
  SECTION("a kernel without IPv6 (socket(AF_INET6) fails with EAFNOSUPPORT): IPv4 on 0.0.0.0") {
    Fd s = listen_socket(HostPort{"", 0}, no_ipv6_socket);
    const auto ss = bound(s);
    REQUIRE(ss.ss_family == AF_INET);
    CHECK(reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr == htonl(INADDR_ANY));
    CHECK(connects("127.0.0.1", port_of(ss)));
  }
  SECTION("an explicit IPv6 address on such a kernel stays an error that names it") {
    try {
      listen_socket(HostPort{"::1", 0}, no_ipv6_socket);
      FAIL("listened without IPv6");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()).find("cannot listen on ::1:0") != std::string::npos);
    }
  }
  SECTION("an explicit IPv4 address, and a bad one") {
    Fd s = listen_socket(HostPort{"127.0.0.1", 0});
    CHECK(bound(s).ss_family == AF_INET);
    CHECK_THROWS_WITH(listen_socket(HostPort{"10.0.0.300", 0}), Catch::Contains("bad listen address 10.0.0.300"));
  }
}

TEST_CASE("source addresses for a peer: the route's source first, then the addresses whose subnet holds it") {
  const auto lo = source_gids_for("127.0.0.1");
  REQUIRE_FALSE(lo.empty());
  Gid want{};
  want[10] = want[11] = 0xff;
  want[12] = 127, want[15] = 1;
  CHECK(lo.front() == want);  // the kernel routes to a local address from itself
  CHECK(std::count(lo.begin(), lo.end(), want) == 1);
  CHECK(source_gids_for("").empty());
  CHECK(source_gids_for("not an address").empty());
}
