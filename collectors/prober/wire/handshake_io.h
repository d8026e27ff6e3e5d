// The handshake's socket side, shared by the prober's transport, its responder and the
// on-demand probe sessions: owned descriptors, blocking frame I/O with a deadline, the TCP
// connect to a responder and the responder's listening socket, and TCP address <-> GID.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectors/prober/wire/handshake.h"
#include "collectors/prober/wire/host_port.h"

namespace rdma::collectors::prober {

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int release() { return std::exchange(fd, -1); }
};

using Deadline = std::chrono::steady_clock::time_point;

// Reads one frame: header, then exactly the announced size. Never allocates more than a frame.
// On failure `why` is handshake_io or handshake_bad_header.
std::optional<std::vector<std::uint8_t>> read_frame(int fd, Deadline d, std::string& why);
bool send_frame(int fd, const std::vector<std::uint8_t>& f, Deadline d);

// Non-blocking TCP connect to a numeric address (IPv4 or IPv6), TCP_NODELAY. On failure an
// invalid Fd and `why`: bad_address or connect.
Fd tcp_connect(const std::string& address, std::uint16_t port, Deadline d, std::string& why);

// The prober side's first step, shared by links and port table requests: TCP connect to the
// responder and read its challenge. The connected socket and the server nonce, or an invalid Fd
// and `why`: tcp_connect's and read_frame's reasons, or handshake_<decode status> (bad_type when
// the frame is another message).
Fd open_handshake(const std::string& address, std::uint16_t port, std::string_view secret, Deadline d, Nonce& server_nonce,
                  std::string& why);

// The responder's non-blocking listening socket on `at`. An empty host is any address: IPv6 and
// IPv4 on one dual-stack socket, or IPv4 alone where the kernel has no IPv6. Throws
// std::runtime_error naming the address when it cannot listen. `make_socket` is socket(2)
// (tests pass one that fails like a kernel without IPv6).
Fd listen_socket(const HostPort& at, int (*make_socket)(int, int, int) = ::socket);

// TCP keepalive and TCP_USER_TIMEOUT on a long-lived handshake connection (its lifetime is a
// QP's): a peer that vanishes without a FIN (power loss, a cut link) makes the kernel close the
// socket with ETIMEDOUT within about `bound` (idle bound/4, then a probe every bound/12; the
// user timeout ends it once bound passes without an answer). 0: leaves the kernel's defaults.
void set_keepalive(int fd, std::chrono::milliseconds bound);

bool v4_mapped(const std::uint8_t* gid);
// The TCP address as a GID (IPv4-mapped for IPv4).
std::optional<Gid> address_gid(const sockaddr_storage& ss);
// The other way: a GID as a numeric address (dotted IPv4 when IPv4-mapped, else IPv6), and a
// numeric address as a GID (nullopt when it is not one).
std::string gid_address(const Gid& gid);
std::optional<Gid> address_gid(const std::string& numeric);
// The local addresses (as GIDs) to send to the numeric `peer` address from, best first: the
// source address of the kernel's route to it (a UDP connect, no packet sent), then the addresses
// of this host whose connected subnet (interface netmask) holds it. A RoCE v2 port uses the
// first of these that is one of its GIDs: the GID on the netdev (VLAN included) that reaches
// the peer.
std::vector<Gid> source_gids_for(const std::string& peer);

// This host's IPv4 and IPv6 interface addresses (getifaddrs), as GIDs with their netmask and
// prefix length: the connected subnets of source_gids_for() and of the port table's GIDs.
struct InterfaceAddress {
  std::string netdev;
  Gid address{}, mask{};
  std::uint8_t prefix_len = 0;  // bits of the address family (IPv4: 0..32)
};
std::vector<InterfaceAddress> interface_addresses();

}  // namespace rdma::collectors::prober
