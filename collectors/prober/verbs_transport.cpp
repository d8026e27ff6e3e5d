#include "collectors/prober/verbs_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <regex>

#include "collectors/prober/handshake.h"
#include "collectors/prober/named_thread.h"

namespace rdma::collectors::prober {

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
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

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

using Deadline = std::chrono::steady_clock::time_point;
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

// Reads one frame: header, then exactly the announced size. Never allocates more than a frame.
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

bool v4_mapped(const std::uint8_t* g) {
  static const std::uint8_t p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, p, 12) == 0;
}

// The TCP address as a GID (IPv4-mapped for IPv4).
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
}  // namespace

struct VerbsTransport::Device {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;         // the probes' send CQ (classic, or the ibv_cq_ex below)
  ibv_cq_ex* cqx = nullptr;     // set when completion timestamps are used
  ibv_cq* idle_cq = nullptr;    // responder QPs: never gets completions
  std::uint64_t clock_khz = 0, ts_mask = 0;
  std::vector<std::uint8_t> src, dst;
  ibv_mr* src_mr = nullptr;
  ibv_mr* dst_mr = nullptr;
  struct Port {
    std::uint32_t num;
    bool ib;
    std::uint16_t lid;
    std::uint8_t mtu;
    int gid_len;
  };
  std::vector<Port> ports;
  // Loop thread only. outstanding: probes posted on live connections and not yet polled;
  // armed: ibv_req_notify_cq done and its event not yet read. The CQ is armed only before a
  // sleep with probes outstanding, so that a completion found by polling costs no wake-up.
  std::uint64_t outstanding = 0;
  bool armed = false;

  ~Device() {
    if (dst_mr) ibv_dereg_mr(dst_mr);
    if (src_mr) ibv_dereg_mr(src_mr);
    if (cq) ibv_destroy_cq(cq);
    if (idle_cq) ibv_destroy_cq(idle_cq);
    if (channel) ibv_destroy_comp_channel(channel);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  const Port* port(std::uint32_t n) const {
    for (const auto& p : ports)
      if (p.num == n) return &p;
    return nullptr;
  }
};

struct VerbsTransport::Conn {
  std::uint64_t link = 0;
  Device* dev = nullptr;
  ibv_qp* qp = nullptr;
  int fd = -1;
  Endpoint remote;
  std::map<std::uint64_t, std::uint64_t> raw_at_post;  // probe -> NIC clock at post
  std::uint64_t outstanding = 0;  // probes posted and not yet polled (counted in dev->outstanding too)
  ~Conn() {
    if (qp) ibv_destroy_qp(qp);
    if (fd >= 0) ::close(fd);
  }
};

namespace {
ibv_qp* create_qp(VerbsTransport::Device& d, ibv_cq* cq) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.sq_sig_all = 0;
  return ibv_create_qp(d.pd, &ia);
}

// INIT -> RTR -> RTS towards `remote`. Returns an error label or "".
std::string connect_qp(ibv_qp* qp, const VerbsTransport::Device::Port& port, int sgid, std::uint32_t my_psn,
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

// GID to use on a port: the configured index, else (RoCE) the RoCE v2 GID of the wanted family,
// or the one equal to `want` when given. -1 = none.
int choose_gid(ibv_context* ctx, const VerbsTransport::Device::Port& port, int configured, bool v4,
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
}  // namespace

VerbsTransport::VerbsTransport(const TransportOptions& opts) : opts_(opts) {
  std::random_device rd;
  instance_ = (std::uint64_t{rd()} << 32) | rd();
}

std::unique_ptr<VerbsTransport> VerbsTransport::open(const TransportOptions& opts, std::string& why) {
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    why = list ? "no RDMA device found" : std::string("ibv_get_device_list: ") + std::strerror(errno ? errno : ENODEV);
    if (list) ibv_free_device_list(list);
    return nullptr;
  }
  std::unique_ptr<VerbsTransport> t(new VerbsTransport(opts));
  std::regex re(opts.device_regex.empty() ? ".*" : opts.device_regex);
  std::vector<std::string> problems;
  for (int i = 0; i < n; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    if (!std::regex_match(name, re)) continue;
    auto d = std::make_unique<Device>();
    d->name = name;
    d->ctx = ibv_open_device(list[i]);
    if (!d->ctx) {
      problems.push_back(name + ": ibv_open_device failed");
      continue;
    }
    ibv_device_attr_ex ax{};
    if (ibv_query_device_ex(d->ctx, nullptr, &ax)) {
      problems.push_back(name + ": ibv_query_device_ex failed");
      continue;
    }
    d->pd = ibv_alloc_pd(d->ctx);
    d->channel = ibv_create_comp_channel(d->ctx);
    const int cqe = static_cast<int>(std::min<std::int64_t>(ax.orig_attr.max_cqe, 4096));
    if (!d->pd || !d->channel) {
      problems.push_back(name + ": cannot allocate a PD or completion channel");
      continue;
    }
    if (ax.completion_timestamp_mask && ax.hca_core_clock) {
      ibv_cq_init_attr_ex ca{};
      ca.cqe = static_cast<std::uint32_t>(cqe);
      ca.channel = d->channel;
      ca.wc_flags = static_cast<std::uint64_t>(IBV_WC_STANDARD_FLAGS) | static_cast<std::uint64_t>(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
      d->cqx = ibv_create_cq_ex(d->ctx, &ca);
      if (d->cqx) {
        d->cq = ibv_cq_ex_to_cq(d->cqx);
        d->clock_khz = ax.hca_core_clock;
        d->ts_mask = ax.completion_timestamp_mask;
      }
    }
    if (!d->cq) d->cq = ibv_create_cq(d->ctx, cqe, nullptr, d->channel, 0);
    d->idle_cq = ibv_create_cq(d->ctx, 1, nullptr, nullptr, 0);
    d->src.assign(std::max<std::size_t>(opts.payload, 1), 0x5a);
    d->dst.assign(std::max<std::size_t>(opts.payload, 1), 0);
    if (d->cq) d->src_mr = ibv_reg_mr(d->pd, d->src.data(), d->src.size(), IBV_ACCESS_LOCAL_WRITE);
    if (d->src_mr) d->dst_mr = ibv_reg_mr(d->pd, d->dst.data(), d->dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!d->cq || !d->idle_cq || !d->dst_mr) {
      problems.push_back(name + ": cannot create CQs or register memory");
      continue;
    }
    for (std::uint32_t p = 1; p <= ax.orig_attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (ibv_query_port(d->ctx, static_cast<std::uint8_t>(p), &pa)) continue;
      if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
      d->ports.push_back({p, pa.link_layer == IBV_LINK_LAYER_INFINIBAND, pa.lid, static_cast<std::uint8_t>(pa.active_mtu),
                          pa.gid_tbl_len});
    }
    if (!d->ports.empty()) t->devices_.push_back(std::move(d));
  }
  ibv_free_device_list(list);
  if (t->devices_.empty()) {
    why = "no usable RDMA port" + std::string(opts.device_regex.empty() ? "" : " matching `" + opts.device_regex + "`");
    for (const auto& p : problems) why += "; " + p;
    return nullptr;
  }
  for (const auto& p : problems) spdlog::warn("prober: {}", p);
  return t;
}

VerbsTransport::~VerbsTransport() {
  stop();
  {
    std::lock_guard lock(mu_);
    by_qpn_.clear();
    conns_.clear();  // QPs before CQs and PDs
  }
  devices_.clear();
  for (int fd : {epoll_fd_, wake_fd_, stop_fd_, listen_fd_})
    if (fd >= 0) ::close(fd);
}

std::vector<LocalPort> VerbsTransport::local_ports() const {
  std::vector<LocalPort> out;
  for (const auto& d : devices_)
    for (const auto& p : d->ports) out.push_back({d->name, p.num});
  return out;
}

VerbsTransport::Device* VerbsTransport::device(const std::string& name) {
  for (auto& d : devices_)
    if (d->name == name) return d.get();
  return nullptr;
}

void VerbsTransport::start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0 || stop_fd_ < 0) throw std::runtime_error(std::string("epoll/eventfd: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  for (auto& d : devices_) {
    fcntl(d->channel->fd, F_SETFL, fcntl(d->channel->fd, F_GETFL) | O_NONBLOCK);
    ev.data.ptr = d.get();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, d->channel->fd, &ev);
  }
  // The responder's listening socket.
  sockaddr_storage ss{};
  socklen_t len = 0;
  const std::string host = opts_.listen.host;
  if (host.find(':') != std::string::npos) {
    auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(opts_.listen.port);
    if (inet_pton(AF_INET6, host.c_str(), &s6.sin6_addr) != 1) throw std::runtime_error("bad listen address " + host);
    len = sizeof s6;
  } else if (!host.empty()) {
    auto& s4 = reinterpret_cast<sockaddr_in&>(ss);
    s4.sin_family = AF_INET;
    s4.sin_port = htons(opts_.listen.port);
    if (inet_pton(AF_INET, host.c_str(), &s4.sin_addr) != 1) throw std::runtime_error("bad listen address " + host);
    len = sizeof s4;
  } else {
    auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(opts_.listen.port);
    s6.sin6_addr = in6addr_any;
    len = sizeof s6;
  }
  Fd s(socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int one = 1, zero = 0;
  setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6 && host.empty()) setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (s.fd < 0 || bind(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(s.fd, 64) != 0)
    throw std::runtime_error("cannot listen on " + (host.empty() ? std::string("*") : host) + ":" +
                             std::to_string(opts_.listen.port) + ": " + std::strerror(errno));
  listen_fd_ = s.release();
  connector_ = named_thread("prober-connect", [this] { connector_main(); });
  responder_ = named_thread("prober-respond", [this] { responder_main(); });
}

void VerbsTransport::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (stop_fd_ >= 0) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(stop_fd_, &one, sizeof one);
  }
  if (connector_.joinable()) connector_.join();
  if (responder_.joinable()) responder_.join();
}

void VerbsTransport::wake() {
  std::uint64_t one = 1;
  if (wake_fd_ >= 0) [[maybe_unused]] auto r = ::write(wake_fd_, &one, sizeof one);
}

void VerbsTransport::push_event(TransportEvent e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    have_events_.store(true, std::memory_order_release);
  }
  wake();
}

// ---------------------------------------------------------------- loop thread

// Right after a post: poll the CQs for up to poll_window (user space, no system call with mlx5
// or rxe), as ib_write_lat does, but bounded. The completion's time is taken right after the
// poll that found it, as after a wake-up. Called per probe, so that probes due at the same moment
// do not add their posting time to each other's round trip.
void VerbsTransport::poll_fresh(std::vector<TransportEvent>& out) {
  if (!fresh_.empty() && opts_.poll_window.count() > 0) {
    const auto deadline = Clock::now() + opts_.poll_window;
    for (;;) {
      bool any = false;
      for (auto& d : devices_)
        if (d->outstanding) any = true, poll_cq(*d, out);
      if (fresh_.empty() || !any) break;
      if (Clock::now() >= deadline) {
        ++poll_misses_;
        break;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }
  fresh_.clear();  // what the window missed is left to the completion channel
}

void VerbsTransport::wait(int timeout_ms, std::vector<TransportEvent>& out) {
  const std::size_t before = out.size();
  // 1. Completions the post-probe polls found, then anything still fresh.
  for (auto& e : settled_) out.push_back(std::move(e));
  settled_.clear();
  poll_fresh(out);
  take_events(out);
  if (out.size() > before) return;  // work to do now: no sleep, no epoll_wait
  // 2. Sleep. Arm the CQs that have probes outstanding, then poll once more: a completion that
  //    came between the last poll and the arming raises no event.
  for (auto& d : devices_)
    if (d->outstanding && !d->armed) {
      ibv_req_notify_cq(d->cq, 0);
      d->armed = true;
      poll_cq(*d, out);
    }
  if (out.size() > before) timeout_ms = 0;
  epoll_event evs[16];
  int n = epoll_wait(epoll_fd_, evs, 16, timeout_ms);
  ++wakeups_;
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.ptr == nullptr) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
      continue;
    }
    Device& d = *static_cast<Device*>(evs[i].data.ptr);
    ibv_cq* ev_cq = nullptr;
    void* ctx = nullptr;
    unsigned got = 0;
    while (ibv_get_cq_event(d.channel, &ev_cq, &ctx) == 0) ++got;  // the channel fd is non-blocking
    if (got) {
      ibv_ack_cq_events(d.cq, got);
      d.armed = false;
    }
    poll_cq(d, out);
  }
  take_events(out);
}

void VerbsTransport::sample_loop_cpu() { loop_cpu_.store(thread_cpu_seconds(), std::memory_order_relaxed); }

void VerbsTransport::take_events(std::vector<TransportEvent>& out) {
  if (!have_events_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
  have_events_.store(false, std::memory_order_relaxed);
}

std::size_t VerbsTransport::poll_cq(Device& d, std::vector<TransportEvent>& out) {
  raw_.clear();
  if (d.cqx) {
    ibv_poll_cq_attr pa{};
    if (ibv_start_poll(d.cqx, &pa) == 0) {
      do {
        raw_.push_back({d.cqx->wr_id, ibv_wc_read_qp_num(d.cqx), d.cqx->status, ibv_wc_read_completion_ts(d.cqx)});
      } while (ibv_next_poll(d.cqx) == 0);
      ibv_end_poll(d.cqx);
    }
  } else {
    ibv_wc wc[32];
    int k;
    while ((k = ibv_poll_cq(d.cq, 32, wc)) > 0)
      for (int i = 0; i < k; ++i) raw_.push_back({wc[i].wr_id, wc[i].qp_num, wc[i].status, std::nullopt});
  }
  if (raw_.empty()) return 0;
  const auto now = Clock::now();
  if (!fresh_.empty()) polled_ += raw_.size();
  std::lock_guard lock(mu_);
  for (const auto& r : raw_) {
    std::erase(fresh_, r.wr_id);
    auto it = by_qpn_.find({&d, r.qpn});
    if (it == by_qpn_.end()) continue;  // a QP torn down meanwhile (its outstanding was dropped then)
    Conn& c = *it->second;
    if (c.outstanding) --c.outstanding, --d.outstanding;
    TransportEvent e;
    e.kind = TransportEvent::Kind::kCompletion;
    e.link = c.link;
    e.probe = r.wr_id;
    e.ok = r.status == IBV_WC_SUCCESS;
    if (!e.ok) e.reason = wc_reason(static_cast<ibv_wc_status>(r.status));
    e.at = now;
    auto posted = c.raw_at_post.find(r.wr_id);
    if (r.ts && posted != c.raw_at_post.end() && d.clock_khz) {
      const std::uint64_t ticks = (*r.ts - posted->second) & d.ts_mask;
      e.nic_seconds = static_cast<double>(ticks) / (static_cast<double>(d.clock_khz) * 1000.0);
    }
    if (posted != c.raw_at_post.end()) c.raw_at_post.erase(posted);
    out.push_back(std::move(e));
  }
  return raw_.size();
}

std::optional<TimePoint> VerbsTransport::post_locked(std::uint64_t link, std::uint64_t probe, std::string& reason) {
  std::lock_guard lock(mu_);
  auto it = conns_.find(link);
  if (it == conns_.end()) return reason = "post_no_qp", std::nullopt;
  Conn& c = *it->second;
  Device& d = *c.dev;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(d.src.data()), static_cast<std::uint32_t>(std::min<std::size_t>(d.src.size(), c.remote.length)),
              d.src_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = probe;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c.remote.addr;
  wr.wr.rdma.rkey = c.remote.rkey;
  if (d.cqx) {
    ibv_values_ex v{};
    v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
    if (ibv_query_rt_values_ex(d.ctx, &v) == 0)
      c.raw_at_post[probe] = static_cast<std::uint64_t>(v.raw_clock.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(v.raw_clock.tv_nsec);
    if (c.raw_at_post.size() > 64) c.raw_at_post.erase(c.raw_at_post.begin());
  }
  const auto t = Clock::now();
  if (int rc = ibv_post_send(c.qp, &wr, &bad)) {
    reason = "post";
    spdlog::debug("prober: ibv_post_send to link {}: {}", link, std::strerror(rc));
    return std::nullopt;
  }
  post_seconds_.store(post_seconds_.load(std::memory_order_relaxed) + Seconds(Clock::now() - t).count(),
                      std::memory_order_relaxed);
  ++c.outstanding, ++d.outstanding;
  fresh_.push_back(probe);
  return t;
}

std::optional<TimePoint> VerbsTransport::post_probe(std::uint64_t link, std::uint64_t probe, std::string& reason) {
  auto posted = post_locked(link, probe, reason);
  if (posted) poll_fresh(settled_);  // poll_cq takes mu_ itself
  return posted;
}

void VerbsTransport::close(std::uint64_t link) {
  std::unique_ptr<Conn> gone;
  {
    std::lock_guard lock(mu_);
    attempts_.erase(link);
    std::erase_if(queue_, [link](const auto& q) { return q.first.link == link; });
    auto it = conns_.find(link);
    if (it == conns_.end()) return;
    by_qpn_.erase({it->second->dev, it->second->qp->qp_num});
    it->second->dev->outstanding -= std::min(it->second->dev->outstanding, it->second->outstanding);
    gone = std::move(it->second);
    conns_.erase(it);
  }
  // Destroyed outside the lock; closing the TCP connection tells the responder to free its QP.
}

void VerbsTransport::connect(const ConnectRequest& r) {
  {
    std::lock_guard lock(mu_);
    const std::uint64_t attempt = next_attempt_++;
    attempts_[r.link] = attempt;
    queue_.emplace_back(r, attempt);
  }
  cv_.notify_one();
}

// ---------------------------------------------------------------- connector thread

void VerbsTransport::connector_main() {
  for (;;) {
    std::pair<ConnectRequest, std::uint64_t> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    do_connect(job.first, job.second);
    connector_cpu_.store(thread_cpu_seconds(), std::memory_order_relaxed);
  }
}

void VerbsTransport::do_connect(const ConnectRequest& r, std::uint64_t attempt) {
  auto fail = [&](const std::string& reason, bool self = false) {
    {
      std::lock_guard lock(mu_);
      auto a = attempts_.find(r.link);
      if (a == attempts_.end() || a->second != attempt) return;  // closed meanwhile
    }
    TransportEvent e;
    e.kind = TransportEvent::Kind::kConnectFailed;
    e.link = r.link;
    e.reason = reason;
    e.self = self;
    e.at = Clock::now();
    push_event(std::move(e));
  };
  Device* d = device(r.local.device);
  const Device::Port* port = d ? d->port(r.local.port) : nullptr;
  if (!port) return fail("no_local_port");
  const Deadline deadline = std::chrono::steady_clock::now() + opts_.handshake_timeout;

  sockaddr_storage ss{};
  socklen_t len = 0;
  bool v4 = r.peer.address.find(':') == std::string::npos;
  if (v4) {
    auto& s4 = reinterpret_cast<sockaddr_in&>(ss);
    s4.sin_family = AF_INET;
    s4.sin_port = htons(r.peer.tcp_port);
    if (inet_pton(AF_INET, r.peer.address.c_str(), &s4.sin_addr) != 1) return fail("bad_address");
    len = sizeof s4;
  } else {
    auto& s6 = reinterpret_cast<sockaddr_in6&>(ss);
    s6.sin6_family = AF_INET6;
    s6.sin6_port = htons(r.peer.tcp_port);
    if (inet_pton(AF_INET6, r.peer.address.c_str(), &s6.sin6_addr) != 1) return fail("bad_address");
    len = sizeof s6;
  }
  Fd s(socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return fail("connect");
  int one = 1;
  setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (errno != EINPROGRESS) return fail("connect");
    pollfd pfd{s.fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (::poll(&pfd, 1, ms_left(deadline)) <= 0 || getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
      return fail("connect");
  }
  std::string why;
  auto challenge_bytes = read_frame(s.fd, deadline, why);
  if (!challenge_bytes) return fail(why);
  auto ch = decode_frame(*challenge_bytes, opts_.secret, {});
  if (ch.status != DecodeStatus::kOk || !std::holds_alternative<Challenge>(*ch.message))
    return fail("handshake_" + std::string(decode_status_label(ch.status == DecodeStatus::kOk ? DecodeStatus::kBadType : ch.status)));
  const Nonce server_nonce = std::get<Challenge>(*ch.message).nonce;

  auto conn = std::make_unique<Conn>();
  conn->link = r.link;
  conn->dev = d;
  conn->qp = create_qp(*d, d->cq);
  if (!conn->qp) return fail("qp_create");
  Hello h;
  h.nonce = random_nonce();
  h.instance = instance_;
  h.name = opts_.node_name.substr(0, kNameSize);
  int sgid = choose_gid(d->ctx, *port, r.peer.gid_index, v4, std::nullopt, h.endpoint.gid);
  if (sgid < 0 && !port->ib) return fail("no_gid");
  h.endpoint.qpn = conn->qp->qp_num;
  h.endpoint.psn = random_psn();
  h.endpoint.lid = port->lid;
  h.endpoint.mtu = port->mtu;
  h.endpoint.is_global = port->ib ? 0 : 1;
  if (!send_frame(s.fd, encode_frame(h, opts_.secret, server_nonce), deadline)) return fail("handshake_io");
  auto reply_bytes = read_frame(s.fd, deadline, why);
  if (!reply_bytes) return fail(why);
  auto reply = decode_frame(*reply_bytes, opts_.secret, h.nonce);
  if (reply.status != DecodeStatus::kOk) return fail("handshake_" + std::string(decode_status_label(reply.status)));
  if (auto* rej = std::get_if<Reject>(&*reply.message))
    return fail("rejected_" + std::string(reject_label(rej->reason)), rej->reason == RejectReason::kSelf);
  auto* acc = std::get_if<Accept>(&*reply.message);
  if (!acc) return fail("handshake_bad_type");
  if (auto err = connect_qp(conn->qp, *port, sgid, h.endpoint.psn, acc->endpoint); !err.empty()) return fail(err);
  conn->remote = acc->endpoint;
  conn->fd = s.release();
  {
    std::lock_guard lock(mu_);
    auto a = attempts_.find(r.link);
    if (a == attempts_.end() || a->second != attempt || stopping_) return;  // closed meanwhile: conn is destroyed
    by_qpn_[{d, conn->qp->qp_num}] = conn.get();
    conns_[r.link] = std::move(conn);
    events_.push_back({TransportEvent::Kind::kConnected, r.link, 0, true, "", Clock::now(), std::nullopt, false});
    have_events_.store(true, std::memory_order_release);
  }
  wake();
}

// ---------------------------------------------------------------- responder thread

// The local port that answers a hello: the one whose GID is the address the prober connected
// to (RoCE), else the first port of the prober's kind with a GID of the same family.
namespace {
using Device = VerbsTransport::Device;
int pick_responder_port(const std::vector<std::unique_ptr<Device>>& devices_, int fd, const Hello& h, Device*& dev,
                        const Device::Port*& port, Gid& gid) {
  sockaddr_storage local{};
  socklen_t ll = sizeof local;
  std::optional<Gid> want;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) == 0) want = address_gid(local);
  const bool peer_v4 = v4_mapped(h.endpoint.gid.data());
  for (int pass = 0; pass < 2; ++pass)
    for (auto& d : devices_)
      for (const auto& p : d->ports) {
        if (p.ib == static_cast<bool>(h.endpoint.is_global)) continue;  // RoCE peers route globally, IB ones by LID
        int g = p.ib ? choose_gid(d->ctx, p, 0, false, std::nullopt, gid)
                     : choose_gid(d->ctx, p, -1, peer_v4, pass == 0 ? want : std::nullopt, gid);
        if (g >= 0) {
          dev = d.get(), port = &p;
          return g;
        }
      }
  return -1;
}
}  // namespace

struct VerbsTransport::Served {
  int fd = -1;
  ibv_qp* qp = nullptr;
  ~Served() {
    if (qp) ibv_destroy_qp(qp);
    if (fd >= 0) ::close(fd);
  }
};

void VerbsTransport::responder_main() {
  std::vector<std::unique_ptr<Served>> served;
  for (;;) {
    std::vector<pollfd> pfds{{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& s : served) pfds.push_back({s->fd, POLLIN, 0});
    int n = ::poll(pfds.data(), pfds.size(), -1);
    if (n < 0 && errno != EINTR) break;
    if (pfds[0].revents) break;
    // A served connection that becomes readable is closed by the prober (or misbehaves): free it.
    for (std::size_t i = served.size(); i-- > 0;) {
      if (!pfds[i + 2].revents) continue;
      std::uint8_t buf[64];
      ssize_t k = ::recv(served[i]->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      served.erase(served.begin() + static_cast<std::ptrdiff_t>(i));
      --responder_qps_;
    }
    if (pfds[1].revents & POLLIN) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        auto s = std::make_unique<Served>();
        s->fd = fd;
        std::string result;
        {
          // serve() fills qp on success; on failure s is dropped (fd closed).
          const bool full = served.size() >= opts_.responder_max_qps;
          Deadline deadline = std::chrono::steady_clock::now() + opts_.handshake_timeout;
          Nonce nonce = random_nonce();
          auto reject = [&](RejectReason why, const Nonce& cn) {
            send_frame(fd, encode_frame(Reject{why}, opts_.secret, cn), deadline);
            result = std::string(reject_label(why));
          };
          if (!send_frame(fd, encode_frame(Challenge{nonce}, opts_.secret, {}), deadline)) {
            result = "io";
          } else if (auto bytes = read_frame(fd, deadline, result); !bytes) {
            if (result == "handshake_io") result = "io";
            else result = "bad_header";
          } else if (auto dec = decode_frame(*bytes, opts_.secret, nonce); dec.status != DecodeStatus::kOk) {
            result = std::string(decode_status_label(dec.status));
          } else if (auto* h = std::get_if<Hello>(&*dec.message); !h) {
            result = "bad_type";
          } else if (h->instance == instance_) {
            reject(RejectReason::kSelf, h->nonce);
          } else if (full) {
            reject(RejectReason::kBusy, h->nonce);
          } else {
            Device* dev = nullptr;
            const Device::Port* port = nullptr;
            Gid gid{};
            int sgid = pick_responder_port(devices_, fd, *h, dev, port, gid);
            if (!dev) {
              reject(RejectReason::kNoPort, h->nonce);
            } else if (!(s->qp = create_qp(*dev, dev->idle_cq))) {
              reject(RejectReason::kQpSetup, h->nonce);
            } else {
              Accept a;
              a.name = opts_.node_name.substr(0, kNameSize);
              a.endpoint.qpn = s->qp->qp_num;
              a.endpoint.psn = random_psn();
              a.endpoint.gid = gid;
              a.endpoint.lid = port->lid;
              a.endpoint.mtu = port->mtu;
              a.endpoint.is_global = port->ib ? 0 : 1;
              a.endpoint.addr = reinterpret_cast<std::uintptr_t>(dev->dst.data());
              a.endpoint.rkey = dev->dst_mr->rkey;
              a.endpoint.length = static_cast<std::uint32_t>(dev->dst.size());
              if (auto err = connect_qp(s->qp, *port, sgid, a.endpoint.psn, h->endpoint); !err.empty()) {
                reject(RejectReason::kQpSetup, h->nonce);
              } else if (!send_frame(fd, encode_frame(a, opts_.secret, h->nonce), deadline)) {
                result = "io";
              } else {
                result = "ok";
              }
            }
          }
        }
        {
          std::lock_guard lock(mu_);
          ++handshakes_[result];
        }
        if (result == "ok") {
          served.push_back(std::move(s));
          ++responder_qps_;
        } else {
          spdlog::debug("prober: responder handshake failed: {}", result);
        }
      }
    }
    responder_cpu_.store(thread_cpu_seconds(), std::memory_order_relaxed);
  }
  responder_qps_ -= served.size();
}

TransportCounters VerbsTransport::counters() const {
  TransportCounters c;
  {
    std::lock_guard lock(mu_);
    c.responder_handshakes = handshakes_;
    c.prober_qps = conns_.size();
  }
  c.responder_qps = responder_qps_.load();
  c.loop_cpu = loop_cpu_.load(std::memory_order_relaxed);
  c.connector_cpu = connector_cpu_.load(std::memory_order_relaxed);
  c.responder_cpu = responder_cpu_.load(std::memory_order_relaxed);
  c.wakeups = wakeups_.load();
  c.polled = polled_.load();
  c.post_seconds = post_seconds_.load(std::memory_order_relaxed);
  c.poll_misses = poll_misses_.load();
  for (const auto& d : devices_) c.timestamps = c.timestamps || d->cqx != nullptr;
  return c;
}

}  // namespace rdma::collectors::prober
