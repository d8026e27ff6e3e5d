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
#include "collectors/prober/verbs_util.h"

namespace rdma::collectors::prober {

namespace {
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
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
  using Port = VerbsPort;
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
    // int{}: verbs.h's ibv_reg_mr macro ANDs the flags with another enum's enumerator (deprecated).
    if (d->cq) d->src_mr = ibv_reg_mr(d->pd, d->src.data(), d->src.size(), int{IBV_ACCESS_LOCAL_WRITE});
    if (d->src_mr) d->dst_mr = ibv_reg_mr(d->pd, d->dst.data(), d->dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!d->cq || !d->idle_cq || !d->dst_mr) {
      problems.push_back(name + ": cannot create CQs or register memory");
      continue;
    }
    d->ports = query_ports(d->ctx, ax.orig_attr.phys_port_cnt);
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
  ibv_send_wr wr = signaled_write(sge, c.remote, probe), *bad = nullptr;
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

  const bool v4 = r.peer.address.find(':') == std::string::npos;
  std::string why;
  Fd s = tcp_connect(r.peer.address, r.peer.tcp_port, deadline, why);
  if (s.fd < 0) return fail(why);
  auto challenge_bytes = read_frame(s.fd, deadline, why);
  if (!challenge_bytes) return fail(why);
  auto ch = decode_frame(*challenge_bytes, opts_.secret, {});
  if (ch.status != DecodeStatus::kOk || !std::holds_alternative<Challenge>(*ch.message))
    return fail("handshake_" + std::string(decode_status_label(ch.status == DecodeStatus::kOk ? DecodeStatus::kBadType : ch.status)));
  const Nonce server_nonce = std::get<Challenge>(*ch.message).nonce;

  auto conn = std::make_unique<Conn>();
  conn->link = r.link;
  conn->dev = d;
  conn->qp = create_qp(d->pd, d->cq);
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
  // A probe session's own buffer (session hello); probes of the prober write into the device's.
  std::vector<std::uint8_t> buf;
  ibv_mr* mr = nullptr;
  ~Served() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (fd >= 0) ::close(fd);
  }
};

// One handshake on an accepted connection. On "ok", s holds the connected QP (and a session's
// buffer); otherwise the result says why not.
std::string VerbsTransport::serve(Served& s, std::size_t served, std::size_t session_bytes) {
  const int fd = s.fd;
  std::string result;
  const Deadline deadline = std::chrono::steady_clock::now() + opts_.handshake_timeout;
  const Nonce nonce = random_nonce();
  auto reject = [&](RejectReason why, const Nonce& cn) {
    send_frame(fd, encode_frame(Reject{why}, opts_.secret, cn), deadline);
    return std::string(reject_label(why));
  };
  if (!send_frame(fd, encode_frame(Challenge{nonce}, opts_.secret, {}), deadline)) return "io";
  auto bytes = read_frame(fd, deadline, result);
  if (!bytes) return result == "handshake_io" ? "io" : "bad_header";
  auto dec = decode_frame(*bytes, opts_.secret, nonce);
  if (dec.status != DecodeStatus::kOk) return std::string(decode_status_label(dec.status));
  const Hello* h = std::get_if<Hello>(&*dec.message);
  const SessionHello* session = std::get_if<SessionHello>(&*dec.message);
  if (session) h = &session->hello;
  if (!h) return "bad_type";
  if (h->instance == instance_) return reject(RejectReason::kSelf, h->nonce);
  if (served >= opts_.responder_max_qps) return reject(RejectReason::kBusy, h->nonce);
  // Sessions: only with a shared secret, and within the responder's memory bound.
  if (session && opts_.secret.empty()) return reject(RejectReason::kNoSecret, h->nonce);
  if (session && session_bytes + session->buffer_bytes > opts_.session_max_bytes) return reject(RejectReason::kBusy, h->nonce);
  Device* dev = nullptr;
  const Device::Port* port = nullptr;
  Gid gid{};
  int sgid = pick_responder_port(devices_, fd, *h, dev, port, gid);
  if (!dev) return reject(RejectReason::kNoPort, h->nonce);
  std::uint64_t addr = reinterpret_cast<std::uintptr_t>(dev->dst.data());
  std::uint32_t rkey = dev->dst_mr->rkey, length = static_cast<std::uint32_t>(dev->dst.size());
  if (session) {
    s.buf.assign(session->buffer_bytes, 0);
    s.mr = ibv_reg_mr(dev->pd, s.buf.data(), s.buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!s.mr) return reject(RejectReason::kQpSetup, h->nonce);
    addr = reinterpret_cast<std::uintptr_t>(s.buf.data()), rkey = s.mr->rkey, length = session->buffer_bytes;
  }
  if (!(s.qp = create_qp(dev->pd, dev->idle_cq))) return reject(RejectReason::kQpSetup, h->nonce);
  Accept a;
  a.name = opts_.node_name.substr(0, kNameSize);
  a.endpoint.qpn = s.qp->qp_num;
  a.endpoint.psn = random_psn();
  a.endpoint.gid = gid;
  a.endpoint.lid = port->lid;
  a.endpoint.mtu = port->mtu;
  a.endpoint.is_global = port->ib ? 0 : 1;
  a.endpoint.addr = addr;
  a.endpoint.rkey = rkey;
  a.endpoint.length = length;
  if (auto err = connect_qp(s.qp, *port, sgid, a.endpoint.psn, h->endpoint); !err.empty())
    return reject(RejectReason::kQpSetup, h->nonce);
  if (!send_frame(fd, encode_frame(a, opts_.secret, h->nonce), deadline)) return "io";
  return session ? "ok_session" : "ok";
}

void VerbsTransport::responder_main() {
  std::vector<std::unique_ptr<Served>> served;
  std::size_t session_bytes = 0;  // buffers of the sessions served now
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
      session_bytes -= served[i]->buf.size();
      served.erase(served.begin() + static_cast<std::ptrdiff_t>(i));
      --responder_qps_;
    }
    if (pfds[1].revents & POLLIN) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        auto s = std::make_unique<Served>();
        s->fd = fd;
        const std::string result = serve(*s, served.size(), session_bytes);
        {
          std::lock_guard lock(mu_);
          ++handshakes_[result];
        }
        if (result == "ok" || result == "ok_session") {
          session_bytes += s->buf.size();
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
