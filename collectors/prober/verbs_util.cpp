#include "collectors/prober/verbs_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

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

std::string wc_reason(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR: return "completion_retry_exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "completion_rnr_retry_exceeded";
    case IBV_WC_REM_ACCESS_ERR: return "completion_remote_access";
    case IBV_WC_REM_INV_REQ_ERR: return "completion_remote_invalid_request";
    case IBV_WC_REM_OP_ERR: return "completion_remote_operation";
    case IBV_WC_LOC_PROT_ERR: return "completion_local_protection";
    case IBV_WC_LOC_QP_OP_ERR: return "completion_local_qp_operation";
    case IBV_WC_WR_FLUSH_ERR: return "completion_flushed";
    default: return "completion_other";
  }
}

bool v4_mapped(const std::uint8_t* g) {
  static const std::uint8_t p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, p, 12) == 0;
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

std::vector<VerbsPort> query_ports(ibv_context* ctx, std::uint32_t port_count) {
  std::vector<VerbsPort> out;
  for (std::uint32_t p = 1; p <= port_count; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<std::uint8_t>(p), &pa)) continue;
    if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
    out.push_back({p, pa.link_layer == IBV_LINK_LAYER_INFINIBAND, pa.lid, static_cast<std::uint8_t>(pa.active_mtu),
                   pa.gid_tbl_len, pa.state == IBV_PORT_ACTIVE});
  }
  return out;
}

ibv_qp* create_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t max_send_wr) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = max_send_wr;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.sq_sig_all = 0;
  return ibv_create_qp(pd, &ia);
}

std::string connect_qp(ibv_qp* qp, const VerbsPort& port, int sgid, std::uint32_t my_psn,
                       const Endpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = static_cast<std::uint8_t>(port.num);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return "qp_init";
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(port.mtu, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<std::uint8_t>(port.num);
  a.ah_attr.dlid = remote.lid;
  if (remote.is_global || !port.ib) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(sgid);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                        IBV_QP_MIN_RNR_TIMER))
    return "qp_rtr";
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 4.096 µs * 2^14 = 67 ms per try; 7 retries: an error completion after ~0.5 s
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = my_psn;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC))
    return "qp_rts";
  return "";
}

int choose_gid(ibv_context* ctx, const VerbsPort& port, int configured, bool v4,
               const std::optional<Gid>& want, Gid& out) {
  auto read = [&](int i, ibv_gid_entry& e) { return ibv_query_gid_ex(ctx, port.num, static_cast<std::uint32_t>(i), &e, 0) == 0; };
  ibv_gid_entry e{};
  if (configured >= 0) {
    if (!read(configured, e)) return -1;
    std::memcpy(out.data(), e.gid.raw, 16);
    return configured;
  }
  if (port.ib) {
    if (!read(0, e)) return -1;
    std::memcpy(out.data(), e.gid.raw, 16);
    return 0;
  }
  int fallback = -1;
  for (int i = 0; i < std::min(port.gid_len, 256); ++i) {
    if (!read(i, e) || e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    if (want && std::memcmp(e.gid.raw, want->data(), 16) == 0) {
      std::memcpy(out.data(), e.gid.raw, 16);
      return i;
    }
    const bool is_v4 = v4_mapped(e.gid.raw);
    const bool link_local = e.gid.raw[0] == 0xfe && (e.gid.raw[1] & 0xc0) == 0x80;
    if (fallback < 0 && is_v4 == v4 && !link_local) {
      std::memcpy(out.data(), e.gid.raw, 16);
      fallback = i;
    }
  }
  return want ? -1 : fallback;
}

std::uint32_t random_psn() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  return rng() & 0xffffff;
}
ibv_send_wr signaled_write(ibv_sge& sge, const Endpoint& remote, std::uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote.addr;
  wr.wr.rdma.rkey = remote.rkey;
  return wr;
}

}  // namespace rdma::collectors::prober
