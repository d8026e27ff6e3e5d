#include "collectors/prober/verbs/verbs_transport.h"

#include "collectors/prober/wire/trace_packet.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <random>

#include "collectors/prober/wire/handshake.h"
#include "collectors/prober/wire/handshake_io.h"
#include "exporter/thread.h"

namespace rdma::collectors::prober {

// One link's queue pair, the TCP connection of its handshake (closing it tells the responder to
// free its side) and the responder's endpoint it writes to.
struct VerbsTransport::LinkQp {
  std::uint64_t link = 0;
  ProbeDevice* dev = nullptr;
  ibv_qp* qp = nullptr;
  Fd fd;
  Endpoint remote;
  std::map<std::uint64_t, std::uint64_t> raw_at_post;  // probe -> NIC clock at post
  std::uint64_t outstanding = 0;  // probes posted and not yet polled (counted in dev->outstanding too)
  ~LinkQp() {
    if (qp) ibv_destroy_qp(qp);
  }
};

VerbsTransport::VerbsTransport(const TransportOptions& opts) : opts_(opts), handshakes_(opts.connect_concurrency) {
  std::random_device rd;
  instance_ = (std::uint64_t{rd()} << 32) | rd();
}

std::unique_ptr<VerbsTransport> VerbsTransport::open(const TransportOptions& opts, std::string& why,
                                                    std::shared_ptr<verbs::DeviceEvents> events) {
  std::unique_ptr<VerbsTransport> t(new VerbsTransport(opts));
  std::vector<std::string> problems;
  std::string no_devices;
  t->device_events_ = std::move(events);
  std::function<std::shared_ptr<ibv_context>(const std::string&)> shared;
  if (t->device_events_) shared = [owner = t->device_events_](const std::string& name) { return owner->context(name); };
  t->devices_ = open_probe_devices(opts.device_regex, opts.payload, no_devices, problems, shared);
  if (!no_devices.empty()) return why = no_devices, nullptr;
  if (t->devices_.empty()) {
    why = "no usable RDMA port" + std::string(opts.device_regex.empty() ? "" : " matching `" + opts.device_regex + "`");
    for (const auto& p : problems) why += "; " + p;
    return nullptr;
  }
  for (const auto& p : problems) spdlog::warn("prober: {}", p);
  t->responder_ = std::make_unique<Responder>(t->opts_, t->instance_, t->devices_);
  return t;
}

VerbsTransport::~VerbsTransport() {
  stop();
  subscription_.reset();  // no signal after this: wake_fd_ may close
  {
    std::lock_guard lock(mu_);
    by_qpn_.clear();
    link_qps_.clear();  // QPs before CQs and PDs
  }
  responder_.reset();  // its QPs too
  devices_.clear();
  for (int fd : {epoll_fd_, wake_fd_})
    if (fd >= 0) ::close(fd);
}

std::vector<LocalPort> VerbsTransport::local_ports() const {
  std::vector<LocalPort> out;
  for (const auto& d : devices_)
    for (const auto& p : d->ports()) out.push_back({d->name, p.num});
  return out;
}

ProbeDevice* VerbsTransport::device(const std::string& name) {
  for (auto& d : devices_)
    if (d->name == name) return d.get();
  return nullptr;
}

void VerbsTransport::start() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw std::runtime_error(std::string("epoll/eventfd: ") + std::strerror(errno));
  // epoll data: 0 = the wake eventfd, 2i+2 = device i's completion channel, 2i+3 its async
  // events (port state, LID and GID changes).
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    for (int fd : {devices_[i]->channel->fd, devices_[i]->ctx->async_fd}) {
      if (fd == devices_[i]->ctx->async_fd && devices_[i]->shared_ctx) continue;  // the owner reads those
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
      ev.data.u64 = 2 * i + (fd == devices_[i]->channel->fd ? 2 : 3);
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    }
  }
  if (device_events_)
    subscription_ = device_events_->subscribe([this](const verbs::DeviceEvents::PortChange& c) {
      {
        std::lock_guard lock(signals_mu_);
        if (signalled_.size() < 1024) signalled_.insert(c.device);
      }
      have_signals_.store(true, std::memory_order_release);
      wake();
    });
  responder_->start();
  for (std::size_t i = 0; i < std::max<std::size_t>(1, opts_.connect_concurrency); ++i)
    connectors_.push_back(exporter::named_thread("prober-connect", [this] { connector_main(); }));
}

void VerbsTransport::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : connectors_)
    if (t.joinable()) t.join();
  if (responder_) responder_->stop();
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

// Polls the CQs that have probes outstanding: once (spin = false), or until every probe posted
// since the last settle() has completed or poll_window has passed (spin = true; user space, no
// system call with mlx5 or rxe), as ib_write_lat does, but bounded. The completion's time is taken
// right after the poll that found it, as after a wake-up.
void VerbsTransport::poll_fresh(std::vector<TransportEvent>& out, bool spin) {
  if (opts_.poll_window.count() == 0) return fresh_.clear();  // no polling: the completion channel
  if (fresh_.empty()) return;
  if (!spin) {
    for (auto& d : devices_)
      if (d->outstanding) poll_cq(*d, out);
    return;
  }
  const auto start = Clock::now(), deadline = start + opts_.poll_window;
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
  poll_seconds_.store(poll_seconds_.load(std::memory_order_relaxed) + Seconds(Clock::now() - start).count(),
                      std::memory_order_relaxed);
  fresh_.clear();  // what the window missed is left to the completion channel
}

void VerbsTransport::settle() { poll_fresh(settled_, true); }

void VerbsTransport::wait(int timeout_ms, std::vector<TransportEvent>& out) {
  const std::size_t before = out.size();
  // 1. Completions the post-probe polls found, then anything still fresh.
  for (auto& e : settled_) out.push_back(std::move(e));
  settled_.clear();
  poll_fresh(out, true);
  take_events(out);
  if (out.size() > before) return ports_before_failures(out, before);  // work to do now: no sleep
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
    const std::uint64_t tag = evs[i].data.u64;
    if (tag == 0) {
      std::uint64_t v;
      [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
      continue;
    }
    ProbeDevice& d = *devices_[tag / 2 - 1];
    if (tag % 2) {
      device_events(d, out);
      continue;
    }
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
  take_port_signals(out);
  take_events(out);
  ports_before_failures(out, before);
}

void VerbsTransport::take_port_signals(std::vector<TransportEvent>& out) {
  if (!have_signals_.exchange(false, std::memory_order_acquire)) return;
  std::set<std::string> names;
  {
    std::lock_guard lock(signals_mu_);
    names.swap(signalled_);
  }
  for (auto& d : devices_)
    if (d->shared_ctx && names.count(d->name)) port_changes(*d, d->refresh_ports(), out);
}

void VerbsTransport::ports_before_failures(std::vector<TransportEvent>& out, std::size_t from) {
  const auto failed = [](const TransportEvent& e) { return e.kind == TransportEvent::Kind::kCompletion && !e.ok; };
  if (std::none_of(out.begin() + static_cast<std::ptrdiff_t>(from), out.end(), failed)) return;
  std::vector<TransportEvent> ports;
  for (auto& d : devices_) port_changes(*d, d->refresh_ports(), ports);
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(from), std::make_move_iterator(ports.begin()),
             std::make_move_iterator(ports.end()));
}

// The device's async events (non-blocking fd): a port that changed state, LID, GID table or SM
// is queried again at once; the loop's one-second port_events() catches anything missed.
void VerbsTransport::device_events(ProbeDevice& d, std::vector<TransportEvent>& out) {
  ibv_async_event ae{};
  bool ports = false;
  while (ibv_get_async_event(d.ctx, &ae) == 0) {
    switch (ae.event_type) {
      case IBV_EVENT_PORT_ACTIVE:
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_LID_CHANGE:
      case IBV_EVENT_GID_CHANGE:
      case IBV_EVENT_SM_CHANGE:
      case IBV_EVENT_CLIENT_REREGISTER: ports = true; break;
      default: break;
    }
    ibv_ack_async_event(&ae);
  }
  if (ports) port_changes(d, d.refresh_ports(), out);
}

void VerbsTransport::port_changes(const ProbeDevice& d, const std::vector<VerbsPort>& changed, std::vector<TransportEvent>& out) {
  for (const auto& p : changed) {
    TransportEvent e;
    e.kind = TransportEvent::Kind::kPortState;
    e.ok = p.active;
    e.at = Clock::now();
    e.local = {d.name, p.num};
    out.push_back(std::move(e));
  }
}

void VerbsTransport::port_events(std::vector<TransportEvent>& out, bool all) {
  for (auto& d : devices_) port_changes(*d, all ? d->ports() : d->refresh_ports(), out);
}

void VerbsTransport::sample_loop_cpu() { loop_cpu_.store(exporter::thread_cpu_seconds(), std::memory_order_relaxed); }

void VerbsTransport::take_events(std::vector<TransportEvent>& out) {
  if (!have_events_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
  have_events_.store(false, std::memory_order_relaxed);
}

std::size_t VerbsTransport::poll_cq(ProbeDevice& d, std::vector<TransportEvent>& out) {
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
    LinkQp& c = *it->second;
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
  auto it = link_qps_.find(link);
  if (it == link_qps_.end()) return reason = "post_no_qp", std::nullopt;
  LinkQp& c = *it->second;
  ProbeDevice& d = *c.dev;
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
  // One pass over the CQs: a completion already in (this probe's with Soft-RoCE, where the round
  // trip runs inside ibv_post_send; an earlier one of this wake-up on hardware) is timed now, not
  // after the posts still to come. The bounded spin waits for settle(), once per wake-up.
  if (posted) poll_fresh(settled_, false);  // poll_cq takes mu_ itself
  return posted;
}

void VerbsTransport::close(std::uint64_t link) {
  std::unique_ptr<LinkQp> gone;
  {
    std::lock_guard lock(mu_);
    attempts_.erase(link);
    handshakes_.drop_connect(link);
    auto it = link_qps_.find(link);
    if (it == link_qps_.end()) return;
    by_qpn_.erase({it->second->dev, it->second->qp->qp_num});
    it->second->dev->outstanding -= std::min(it->second->dev->outstanding, it->second->outstanding);
    gone = std::move(it->second);
    link_qps_.erase(it);
  }
  // Destroyed outside the lock; closing the TCP connection tells the responder to free its QP.
}

void VerbsTransport::pair(std::uint64_t request, const PeerSpec& peer) {
  {
    std::lock_guard lock(mu_);
    HandshakeJob job;
    job.kind = HandshakeJob::Kind::kPair;
    job.id = request;
    job.peer = peer;
    handshakes_.push(std::move(job));
  }
  cv_.notify_one();
}

void VerbsTransport::connect(const ConnectRequest& r) {
  {
    std::lock_guard lock(mu_);
    const std::uint64_t attempt = next_attempt_++;
    attempts_[r.link] = attempt;
    HandshakeJob job;
    job.id = r.link;
    job.attempt = attempt;
    job.connect = r;
    handshakes_.push(std::move(job));
  }
  cv_.notify_one();
}

// ---------------------------------------------------------------- connector workers

void VerbsTransport::connector_main() {
  double last_cpu = 0;  // this worker's CPU time at its last sample: the workers' sum is the counter
  for (;;) {
    HandshakeJob job;
    {
      std::unique_lock lock(mu_);
      std::optional<HandshakeJob> next;
      cv_.wait(lock, [&] { return stopping_ || (next = handshakes_.take()).has_value(); });
      if (stopping_) return;
      job = std::move(*next);
      if (job.kind == HandshakeJob::Kind::kConnect) {
        auto a = attempts_.find(job.id);
        if (a != attempts_.end() && a->second == job.attempt) {
          // Its time starts now, not when it was queued (the engine's connect timeout too).
          events_.push_back({TransportEvent::Kind::kConnectStarted, job.id, 0, true, "", Clock::now(), std::nullopt, false});
          have_events_.store(true, std::memory_order_release);
        }
      }
    }
    wake();
    const bool pair = job.kind == HandshakeJob::Kind::kPair;
    const std::string key = HandshakeQueue::key(pair ? job.peer : job.connect.peer);
    const bool unreachable = pair ? do_pair(job.id, job.peer) : do_connect(job.connect, job.attempt);
    std::vector<HandshakeJob> failed;
    {
      std::lock_guard lock(mu_);
      failed = handshakes_.done(key, unreachable);
    }
    for (const auto& f : failed) connect_failed(f.id, f.attempt, "connect");
    cv_.notify_all();  // the peer is free again: its next job may start
    const double cpu = exporter::thread_cpu_seconds();
    double total = connector_cpu_.load(std::memory_order_relaxed);
    while (!connector_cpu_.compare_exchange_weak(total, total + (cpu - last_cpu), std::memory_order_relaxed)) {
    }
    last_cpu = cpu;
  }
}

// The prober side of a port table exchange: challenge, port request, table; then pairs this
// host's ports with the peer's (pairing.h). A responder that closes after the request is one
// from before port tables: every local port is paired with whatever port it chooses, rail "".
bool VerbsTransport::do_pair(std::uint64_t request, const PeerSpec& peer) {
  TransportEvent e;
  e.kind = TransportEvent::Kind::kPaired;
  e.link = request;
  auto answer = [&](std::string reason) {
    e.ok = reason.empty();
    e.reason = std::move(reason);
    e.at = Clock::now();
    push_event(std::move(e));
  };
  const Deadline deadline = std::chrono::steady_clock::now() + opts_.handshake_timeout;
  std::string why;
  Nonce server_nonce{};
  Fd s = open_handshake(peer.address, peer.tcp_port, opts_.secret, deadline, server_nonce, why);
  if (s.fd < 0) return answer("pairing_" + why), why == "connect";
  const PortRequest req{random_nonce()};
  if (!send_frame(s.fd, encode_frame(req, opts_.secret, server_nonce), deadline))
    return answer("pairing_io"), false;
  auto table_bytes = read_frame(s.fd, deadline, why);
  if (!table_bytes) {
    if (why != "handshake_io") return answer("pairing_" + why), false;  // io: it closed (as probe sessions tell it)
    for (const auto& l : local_ports()) e.pairs.push_back(PeerPort{l, "", 0, "", {}, {}});
    return answer(""), false;
  }
  auto table = decode_frame(*table_bytes, opts_.secret, req.nonce);
  if (table.status != DecodeStatus::kOk || !std::holds_alternative<PortTable>(*table.message))
    return answer("pairing_" + std::string(decode_status_label(table.status == DecodeStatus::kOk ? DecodeStatus::kBadType : table.status))), false;
  const auto& theirs = std::get<PortTable>(*table.message).ports;
  const auto ours = describe_ports(devices_, opts_.rails);
  // On InfiniBand both LIDs travel with the pair: the pma collector routes the link by them.
  auto lid = [](const TablePort& t) { return t.link_layer == LinkLayer::kInfiniBand ? t.lid : std::uint16_t{0}; };
  for (const auto& p : pair_ports(ours, theirs, opts_.cross_rail, address_gid(peer.address)))
    e.pairs.push_back(PeerPort{{ours[p.local].device, ours[p.local].port}, theirs[p.peer].device, theirs[p.peer].port, p.rail,
                               p.source, p.dest, lid(ours[p.local]), lid(theirs[p.peer])});
  if (e.pairs.empty())
    spdlog::debug("prober: {} ({}) shares no rail with this host: no links (rails:, cross_rail)", peer.name,
                  std::get<PortTable>(*table.message).name);
  answer("");
  return false;
}

void VerbsTransport::connect_failed(std::uint64_t link, std::uint64_t attempt, const std::string& reason, bool self) {
  {
    std::lock_guard lock(mu_);
    auto a = attempts_.find(link);
    if (a == attempts_.end() || a->second != attempt) return;  // closed meanwhile
  }
  TransportEvent e;
  e.kind = TransportEvent::Kind::kConnectFailed;
  e.link = link;
  e.reason = reason;
  e.self = self;
  e.at = Clock::now();
  push_event(std::move(e));
}

namespace {
// What the path tracer needs of a RoCE v2 flow: its GIDs, its source GID's netdev, its UDP source
// port (the flow label's, as the NIC derives it) and the destination QP. None on InfiniBand or
// for a RoCE v1 GID (no IP header to trace with).
std::optional<TraceTarget> trace_target(ibv_context* ctx, const VerbsPort& port, int sgid, const Endpoint& local,
                                        const Endpoint& remote, std::uint8_t tos, std::uint32_t flow_label) {
  if (port.ib || sgid < 0) return std::nullopt;
  ibv_gid_entry g{};
  if (ibv_query_gid_ex(ctx, port.num, static_cast<std::uint32_t>(sgid), &g, 0) != 0 || g.gid_type != IBV_GID_TYPE_ROCE_V2)
    return std::nullopt;
  TraceTarget t;
  t.source = local.gid;
  t.dest = remote.gid;
  t.ifindex = g.ndev_ifindex;
  t.sport = qp_udp_sport(flow_label, local.qpn, remote.qpn);
  t.dest_qpn = remote.qpn;
  t.tos = tos;
  return t;
}
}  // namespace

bool VerbsTransport::do_connect(const ConnectRequest& r, std::uint64_t attempt) {
  auto fail = [&](const std::string& reason, bool self = false) {
    connect_failed(r.link, attempt, reason, self);
    return reason == "connect";  // the TCP connect itself: the peer's address does not answer
  };
  ProbeDevice* d = device(r.local.device);
  const std::optional<VerbsPort> port = d ? d->port(r.local.port) : std::nullopt;
  if (!port) return fail("no_local_port");
  const Deadline deadline = std::chrono::steady_clock::now() + opts_.handshake_timeout;

  std::string why;
  Nonce server_nonce{};
  Fd s = open_handshake(r.peer.address, r.peer.tcp_port, opts_.secret, deadline, server_nonce, why);
  if (s.fd < 0) return fail(why);

  auto conn = std::make_unique<LinkQp>();
  conn->link = r.link;
  conn->dev = d;
  conn->qp = create_qp(d->pd, d->cq);
  if (!conn->qp) return fail("qp_create");
  Hello h;
  h.nonce = random_nonce();
  h.instance = instance_;
  h.name = opts_.node_name.substr(0, kNameSize);
  // The pair's source GID (the one in the peer port's subnet), else the GID whose netdev routes
  // to the peer port's address (or the peer's, without a table); a configured index wins.
  const bool targeted = !r.target.device.empty();
  int sgid = -1;
  if (targeted && r.peer.gid_index < 0 && !port->ib && r.target.source != Gid{})
    sgid = choose_gid(d->ctx, *port, -1, v4_mapped(r.target.source.data()), r.target.source, h.endpoint.gid);
  if (sgid < 0)
    sgid = choose_source_gid(d->ctx, *port, r.peer.gid_index,
                             targeted && !port->ib ? gid_address(r.target.dest) : r.peer.address, h.endpoint.gid);
  if (sgid < 0 && !port->ib) return fail("no_gid");
  h.endpoint.qpn = conn->qp->qp_num;
  h.endpoint.psn = random_psn();
  h.endpoint.lid = port->lid;
  h.endpoint.mtu = port->mtu;
  h.endpoint.is_global = port->ib ? 0 : 1;
  const auto hello_frame = targeted ? encode_frame(TargetedHello{h, r.target.device, static_cast<std::uint8_t>(r.target.port), r.target.dest},
                                                   opts_.secret, server_nonce)
                                     : encode_frame(h, opts_.secret, server_nonce);
  if (!send_frame(s.fd, hello_frame, deadline)) return fail("handshake_io");
  auto reply_bytes = read_frame(s.fd, deadline, why);
  if (!reply_bytes) return fail(why);
  auto reply = decode_frame(*reply_bytes, opts_.secret, h.nonce);
  if (reply.status != DecodeStatus::kOk) return fail("handshake_" + std::string(decode_status_label(reply.status)));
  if (auto* rej = std::get_if<Reject>(&*reply.message))
    return fail("rejected_" + std::string(reject_label(rej->reason)), rej->reason == RejectReason::kSelf);
  auto* acc = std::get_if<Accept>(&*reply.message);
  if (!acc) return fail("handshake_bad_type");
  if (auto err = connect_qp(conn->qp, *port, sgid, h.endpoint.psn, acc->endpoint, opts_.traffic_class, r.flow_label);
      !err.empty())
    return fail(err);
  conn->remote = acc->endpoint;
  set_keepalive(s.fd, opts_.served_keepalive);  // a responder gone without a FIN: the socket errors out, not hangs
  conn->fd = std::move(s);
  {
    std::lock_guard lock(mu_);
    auto a = attempts_.find(r.link);
    if (a == attempts_.end() || a->second != attempt || stopping_) return false;  // closed meanwhile: conn is destroyed
    by_qpn_[{d, conn->qp->qp_num}] = conn.get();
    link_qps_[r.link] = std::move(conn);
    TransportEvent e{TransportEvent::Kind::kConnected, r.link, 0, true, "", Clock::now(), std::nullopt, false};
    e.trace = trace_target(d->ctx, *port, sgid, h.endpoint, acc->endpoint, opts_.traffic_class.traffic_class, r.flow_label);
    events_.push_back(std::move(e));
    have_events_.store(true, std::memory_order_release);
  }
  wake();
  return false;
}

TransportCounters VerbsTransport::counters() const {
  TransportCounters c;
  {
    std::lock_guard lock(mu_);
    c.prober_qps = link_qps_.size();
  }
  {
    std::lock_guard lock(mu_);
    c.connects_queued = handshakes_.queued();
    c.connects_running = handshakes_.running();
  }
  c.responder_handshakes = responder_->handshakes();
  c.responder_refused = responder_->refused();
  c.responder_evicted = responder_->evicted();
  c.responder_pending = responder_->pending();
  c.responder_dead_peers = responder_->dead_peers();
  c.responder_up = responder_->up();
  c.responder_qps = responder_->qps();
  c.loop_cpu = loop_cpu_.load(std::memory_order_relaxed);
  c.connector_cpu = connector_cpu_.load(std::memory_order_relaxed);
  c.responder_cpu = responder_->cpu_seconds();
  c.wakeups = wakeups_.load();
  c.polled = polled_.load();
  c.post_seconds = post_seconds_.load(std::memory_order_relaxed);
  c.poll_misses = poll_misses_.load();
  c.poll_seconds = poll_seconds_.load(std::memory_order_relaxed);
  for (const auto& d : devices_) c.timestamps = c.timestamps || d->cqx != nullptr;
  return c;
}

}  // namespace rdma::collectors::prober
