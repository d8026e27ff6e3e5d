#include "collectors/prober/verbs/responder.h"

#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "exporter/thread.h"
#include "collectors/prober/verbs/transport_options.h"
#include "collectors/prober/wire/pending_admission.h"

namespace rdma::collectors::prober {

namespace {
// The local port that answers a hello: the one whose GID is the address the prober connected
// to (RoCE), else the first port of the prober's kind with a GID of the same family.
int pick_responder_port(const std::vector<std::unique_ptr<ProbeDevice>>& devices, int fd, const Hello& h, ProbeDevice*& dev,
                        VerbsPort& port, Gid& gid) {
  sockaddr_storage local{};
  socklen_t ll = sizeof local;
  std::optional<Gid> want;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) == 0) want = address_gid(local);
  const bool peer_v4 = v4_mapped(h.endpoint.gid.data());
  for (int pass = 0; pass < 2; ++pass)
    for (auto& d : devices)
      for (const auto& p : d->ports()) {
        if (p.ib == static_cast<bool>(h.endpoint.is_global)) continue;  // RoCE peers route globally, IB ones by LID
        if (!p.active) continue;  // a DOWN port answers nothing
        int g = p.ib ? choose_gid(d->ctx, p, 0, false, std::nullopt, gid)
                     : choose_gid(d->ctx, p, -1, peer_v4, pass == 0 ? want : std::nullopt, gid);
        if (g >= 0) {
          dev = d.get(), port = p;
          return g;
        }
      }
  return -1;
}

// The port a targeted hello names, and its GID the prober paired with (InfiniBand: GID 0). -1
// when the device or port is not ours, not ACTIVE, of the other link layer, or lacks the GID.
int pick_named_port(const std::vector<std::unique_ptr<ProbeDevice>>& devices, const TargetedHello& t, ProbeDevice*& dev,
                    VerbsPort& port, Gid& gid) {
  for (auto& d : devices) {
    if (d->name != t.device) continue;
    const auto p = d->port(t.port);
    if (!p || !p->active || p->ib == static_cast<bool>(t.hello.endpoint.is_global)) return -1;
    const int g = p->ib ? choose_gid(d->ctx, *p, 0, false, std::nullopt, gid)
                        : choose_gid(d->ctx, *p, -1, v4_mapped(t.gid.data()), t.gid, gid);
    if (g >= 0) dev = d.get(), port = *p;
    return g;
  }
  return -1;
}
}  // namespace

// One accepted connection and the responder QP it keeps alive.
struct Responder::ServedQp {
  Fd fd;
  std::string source;  // the peer's address (numeric), for the per-source bound
  ibv_qp* qp = nullptr;
  // A probe session's own buffer (session hello); probes of the prober write into the device's.
  std::vector<std::uint8_t> buf;
  ibv_mr* mr = nullptr;
  ~ServedQp() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
  }
};

// A connection not yet handshaken: the challenge going out, the client's frame coming in, the
// reply going out. Each has its own deadline; nothing in it ever blocks.
struct Responder::Pending {
  enum class Phase : std::uint8_t { kChallenge, kRead, kReply };
  std::unique_ptr<ServedQp> s = std::make_unique<ServedQp>();
  PendingAdmission::Id id = 0;  // in Loop::admission
  Deadline deadline{};
  Nonce nonce{};
  Phase phase = Phase::kChallenge;
  std::vector<std::uint8_t> out, in = std::vector<std::uint8_t>(kHeaderSize);
  std::size_t sent = 0, got = 0;
  std::string result;  // kReply: what to count once the reply is out
};

// The thread's state: served QPs, pending handshakes and the per-source counts that bound them.
struct Responder::Loop {
  explicit Loop(PendingAdmission::Limits l) : admission(l) {}
  std::vector<std::unique_ptr<ServedQp>> served;
  std::vector<std::unique_ptr<Pending>> pending;
  PendingAdmission admission;  // which pending connection a newcomer replaces
  std::map<std::string, std::size_t> served_by_source;
  std::size_t session_bytes = 0;  // buffers of the sessions served now
};

Responder::Responder(const TransportOptions& opts, std::uint64_t instance, const std::vector<std::unique_ptr<ProbeDevice>>& devices)
    : opts_(opts), instance_(instance), devices_(devices) {}

Responder::~Responder() { stop(); }

void Responder::start() {
  stop_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (stop_.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  listen_ = listen_socket(opts_.listen);
  up_ = true;
  thread_ = exporter::named_thread("prober-respond", [this] { main(); });
}

void Responder::stop() {
  if (stop_.fd >= 0) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(stop_.fd, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  up_ = false;
}

std::map<std::string, std::uint64_t> Responder::handshakes() const {
  std::lock_guard lock(mu_);
  return handshakes_;
}

std::uint16_t Responder::port() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(listen_.fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(ss).sin6_port
                                        : reinterpret_cast<const sockaddr_in&>(ss).sin_port);
}

std::map<std::string, std::uint64_t> Responder::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

std::map<std::string, std::uint64_t> Responder::evicted() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

std::chrono::milliseconds Responder::pending_timeout() const {
  return std::min(opts_.responder_pending_timeout, opts_.handshake_timeout);
}

void Responder::count(std::map<std::string, std::uint64_t>& m, const std::string& key) {
  std::lock_guard lock(mu_);
  ++m[key];
}

std::string Responder::answer(ServedQp& s, const std::vector<std::uint8_t>& frame, const Nonce& nonce, const std::string& source,
                              const Loop& loop, std::vector<std::uint8_t>& reply) {
  const int fd = s.fd.fd;
  auto reject = [&](RejectReason why, const Nonce& cn, std::string label = {}) {
    reply = encode_frame(Reject{why}, opts_.secret, cn);
    return label.empty() ? std::string(reject_label(why)) : label;
  };
  auto dec = decode_frame(frame, opts_.secret, nonce);
  if (dec.status != DecodeStatus::kOk) return std::string(decode_status_label(dec.status));
  if (const auto* req = std::get_if<PortRequest>(&*dec.message)) {
    const PortTable table{opts_.node_name.substr(0, kNameSize), describe_ports(devices_, opts_.rails)};
    reply = encode_frame(table, opts_.secret, req->nonce);
    return "port_table";
  }
  const Hello* h = std::get_if<Hello>(&*dec.message);
  const SessionHello* session = std::get_if<SessionHello>(&*dec.message);
  const TargetedHello* targeted = std::get_if<TargetedHello>(&*dec.message);
  if (session) h = &session->hello;
  if (targeted) h = &targeted->hello;
  if (!h) return "bad_type";
  if (h->instance == instance_) return reject(RejectReason::kSelf, h->nonce);
  if (loop.served.size() >= opts_.responder_max_qps) return reject(RejectReason::kBusy, h->nonce);
  // One source address never holds more than its share, with or without a secret.
  if (auto it = loop.served_by_source.find(source);
      it != loop.served_by_source.end() && it->second >= opts_.responder_max_qps_per_source)
    return reject(RejectReason::kBusy, h->nonce, "busy_source");
  // Sessions: only with a shared secret, and within the responder's memory bound.
  if (session && opts_.secret.empty()) return reject(RejectReason::kNoSecret, h->nonce);
  if (session && loop.session_bytes + session->buffer_bytes > opts_.session_max_bytes) return reject(RejectReason::kBusy, h->nonce);
  ProbeDevice* dev = nullptr;
  VerbsPort port;
  Gid gid{};
  int sgid = targeted ? pick_named_port(devices_, *targeted, dev, port, gid) : pick_responder_port(devices_, fd, *h, dev, port, gid);
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
  a.endpoint.lid = port.lid;
  a.endpoint.mtu = port.mtu;
  a.endpoint.is_global = port.ib ? 0 : 1;
  a.endpoint.addr = addr;
  a.endpoint.rkey = rkey;
  a.endpoint.length = length;
  if (auto err = connect_qp(s.qp, port, sgid, a.endpoint.psn, h->endpoint, opts_.traffic_class); !err.empty())
    return reject(RejectReason::kQpSetup, h->nonce);
  reply = encode_frame(a, opts_.secret, h->nonce);
  return session ? "ok_session" : "ok";
}

// Accepts what the backlog holds (at most a bounded batch per wake-up, so that pending
// handshakes advance meanwhile). Every connection is taken in: beyond the pending bounds the one
// PendingAdmission names (the busiest prefix's or address's oldest) is closed instead.
void Responder::accept_all(Loop& loop) {
  for (int batch = 0; batch < 64; ++batch) {
    sockaddr_storage from{};
    socklen_t fl = sizeof from;
    Fd fd(accept4(listen_.fd, reinterpret_cast<sockaddr*>(&from), &fl, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) count(refused_, "accept");
      return;
    }
    const Gid gid = address_gid(from).value_or(Gid{});  // TCP peers are IPv4 or IPv6: never the zero GID
    const auto admitted = loop.admission.admit(gid);
    if (admitted.evict) {
      // Closed without a log line (a flood would fill the log): counted by reason instead.
      auto it = std::find_if(loop.pending.begin(), loop.pending.end(), [&](const auto& p) { return p->id == *admitted.evict; });
      if (it != loop.pending.end()) loop.pending.erase(it);
      count(evicted_, std::string(admitted.reason));
    }
    auto p = std::make_unique<Pending>();
    p->id = admitted.id;
    p->s->fd = std::move(fd);
    p->s->source = gid_address(gid);
    p->deadline = std::chrono::steady_clock::now() + pending_timeout();
    p->nonce = random_nonce();
    p->out = encode_frame(Challenge{p->nonce}, opts_.secret, {});
    loop.pending.push_back(std::move(p));
    if (pump(loop, *loop.pending.back())) loop.pending.pop_back();
  }
}

void Responder::finish(Loop& loop, Pending& p, std::string result) {
  count(handshakes_, result);
  loop.admission.remove(p.id);
  if (result != "ok" && result != "ok_session") {
    if (result != "port_table") spdlog::debug("prober: responder handshake from {} failed: {}", p.s->source, result);
    return;  // the connection closes with p
  }
  set_keepalive(p.s->fd.fd, opts_.served_keepalive);
  ++loop.served_by_source[p.s->source];
  loop.session_bytes += p.s->buf.size();
  loop.served.push_back(std::move(p.s));
  ++qps_;
}

bool Responder::pump(Loop& loop, Pending& p) {
  using Phase = Pending::Phase;
  for (;;) {
    if (p.phase == Phase::kChallenge || p.phase == Phase::kReply) {
      while (p.sent < p.out.size()) {
        ssize_t k = ::send(p.s->fd.fd, p.out.data() + p.sent, p.out.size() - p.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
        if (k <= 0) return finish(loop, p, "io"), true;
        p.sent += static_cast<std::size_t>(k);
      }
      if (p.phase == Phase::kReply) return finish(loop, p, std::move(p.result)), true;
      p.phase = Phase::kRead;
    }
    // kRead: the header, then exactly the size it announces (never more than one frame).
    while (p.got < p.in.size()) {
      ssize_t k = ::recv(p.s->fd.fd, p.in.data() + p.got, p.in.size() - p.got, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
      if (k <= 0) return finish(loop, p, "io"), true;
      p.got += static_cast<std::size_t>(k);
      if (p.got == kHeaderSize && p.in.size() == kHeaderSize) {
        auto size = frame_size(p.in);
        if (!size) return finish(loop, p, "bad_header"), true;
        p.in.resize(*size);
      }
    }
    std::vector<std::uint8_t> reply;
    p.result = answer(*p.s, p.in, p.nonce, p.s->source, loop, reply);
    if (reply.empty()) return finish(loop, p, std::move(p.result)), true;
    p.out = std::move(reply), p.sent = 0, p.phase = Phase::kReply;
  }
}

void Responder::run(Loop& loop) {
  std::vector<pollfd> pfds;
  for (;;) {
    // [stop, listen, pending..., served...]: rebuilt each round (a few hundred descriptors at
    // most: both sets are bounded).
    pfds.assign({{stop_.fd, POLLIN, 0}, {listen_.fd, POLLIN, 0}});
    auto now = std::chrono::steady_clock::now();
    Deadline next = now + std::chrono::hours(1);
    for (const auto& p : loop.pending) {
      pfds.push_back({p->s->fd.fd, static_cast<short>(p->phase == Pending::Phase::kRead ? POLLIN : POLLOUT), 0});
      next = std::min(next, p->deadline);
    }
    for (const auto& s : loop.served) pfds.push_back({s->fd.fd, POLLIN, 0});
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    const int n = ::poll(pfds.data(), pfds.size(), static_cast<int>(std::clamp<long long>(wait, 0, 3600000)));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    }
    if (pfds[0].revents) return;
    // A served connection that becomes readable is closed by the prober (or misbehaves, or the
    // kernel gave up on a silent peer: ETIMEDOUT): free its QP.
    const std::size_t served_at = 2 + loop.pending.size();
    for (std::size_t i = loop.served.size(); i-- > 0;) {
      if (!pfds[served_at + i].revents) continue;
      auto& s = *loop.served[i];
      std::uint8_t buf[64];
      ssize_t k = ::recv(s.fd.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      // An error rather than a close: the kernel gave up on the peer (ETIMEDOUT after the
      // keepalive probes, or the soft error of their failed sends: EHOSTUNREACH, ...) or it reset.
      if (k < 0) ++dead_peers_;
      if (auto it = loop.served_by_source.find(s.source); it != loop.served_by_source.end() && --it->second == 0)
        loop.served_by_source.erase(it);
      loop.session_bytes -= s.buf.size();
      loop.served.erase(loop.served.begin() + static_cast<std::ptrdiff_t>(i));
      --qps_;
    }
    // Pending handshakes: those whose socket is ready advance; those past their deadline end.
    now = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Pending>> still;
    still.reserve(loop.pending.size());
    for (std::size_t i = 0; i < loop.pending.size(); ++i) {
      auto& p = *loop.pending[i];
      bool done = false;
      if (pfds[2 + i].revents) done = pump(loop, p);
      if (!done && now >= p.deadline) finish(loop, p, "timeout"), done = true;
      if (!done) still.push_back(std::move(loop.pending[i]));
    }
    loop.pending = std::move(still);
    if (pfds[1].revents & POLLIN) accept_all(loop);
    pending_count_.store(loop.pending.size());
    cpu_.store(exporter::thread_cpu_seconds(), std::memory_order_relaxed);
  }
}

void Responder::main() {
  Loop loop({opts_.responder_max_pending, opts_.responder_max_pending_per_source});
  bool stopped = false;
  try {
    run(loop);
    stopped = true;
  } catch (const std::exception& e) {
    spdlog::error("prober: the responder stopped: {}; peers cannot connect to this node until the prober is restarted",
                  e.what());
  }
  if (!stopped) up_ = false;
  qps_ -= loop.served.size();
  pending_count_ = 0;
}

}  // namespace rdma::collectors::prober
