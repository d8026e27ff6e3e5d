// Verbs and handshake plumbing shared by the prober's transport (verbs_transport.cpp) and the
// on-demand probe sessions (probe_session.cpp): blocking frame I/O with a deadline, a TCP connect
// to a responder, RC queue pair creation and INIT -> RTR -> RTS, and the source GID choice.
#pragma once

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectors/prober/handshake.h"

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

// A failed work completion as an error label: completion_retry_exceeded, completion_flushed, ...
std::string wc_reason(ibv_wc_status s);

bool v4_mapped(const std::uint8_t* gid);
// The TCP address as a GID (IPv4-mapped for IPv4).
std::optional<Gid> address_gid(const sockaddr_storage& ss);

// A port as the prober uses it.
struct VerbsPort {
  std::uint32_t num = 0;
  bool ib = false;
  std::uint16_t lid = 0;
  std::uint8_t mtu = 0;  // enum ibv_mtu
  int gid_len = 0;
  bool active = false;
};
// The InfiniBand and Ethernet ports of an open device.
std::vector<VerbsPort> query_ports(ibv_context* ctx, std::uint32_t port_count);

// An RC queue pair on `cq` for RDMA WRITEs.
ibv_qp* create_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t max_send_wr = 16);
// INIT -> RTR -> RTS towards `remote`. Returns an error label (qp_init, qp_rtr, qp_rts) or "".
std::string connect_qp(ibv_qp* qp, const VerbsPort& port, int sgid, std::uint32_t my_psn, const Endpoint& remote);
// GID to use on a port: the configured index, else (RoCE) the RoCE v2 GID of the wanted family,
// or the one equal to `want` when given. -1 = none.
int choose_gid(ibv_context* ctx, const VerbsPort& port, int configured, bool v4, const std::optional<Gid>& want, Gid& out);
std::uint32_t random_psn();
// A signaled RDMA WRITE of `sge` (which must outlive the post) to the remote's buffer.
ibv_send_wr signaled_write(ibv_sge& sge, const Endpoint& remote, std::uint64_t wr_id);

}  // namespace rdma::collectors::prober
