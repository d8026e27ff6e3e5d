#include "collectors/prober/responder.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "collectors/prober/named_thread.h"
#include "collectors/prober/verbs_transport.h"

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
  ibv_qp* qp = nullptr;
  // A probe session's own buffer (session hello); probes of the prober write into the device's.
  std::vector<std::uint8_t> buf;
  ibv_mr* mr = nullptr;
  ~ServedQp() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
  }
};

Responder::Responder(const TransportOptions& opts, std::uint64_t instance, const std::vector<std::unique_ptr<ProbeDevice>>& devices)
    : opts_(opts), instance_(instance), devices_(devices) {}

Responder::~Responder() { stop(); }

void Responder::start() {
  stop_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (stop_.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  listen_ = listen_socket(opts_.listen);
  thread_ = named_thread("prober-respond", [this] { main(); });
}

void Responder::stop() {
  if (stop_.fd >= 0) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(stop_.fd, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, std::uint64_t> Responder::handshakes() const {
  std::lock_guard lock(mu_);
  return handshakes_;
}

// One handshake on an accepted connection. On "ok", s holds the connected QP (and a session's
// buffer); otherwise the result says why not.
std::string Responder::answer_hello(ServedQp& s, std::size_t served, std::size_t session_bytes) {
  const int fd = s.fd.fd;
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
  if (const auto* req = std::get_if<PortRequest>(&*dec.message)) {
    const PortTable table{opts_.node_name.substr(0, kNameSize), describe_ports(devices_, opts_.rails)};
    return send_frame(fd, encode_frame(table, opts_.secret, req->nonce), deadline) ? "port_table" : "io";
  }
  const Hello* h = std::get_if<Hello>(&*dec.message);
  const SessionHello* session = std::get_if<SessionHello>(&*dec.message);
  const TargetedHello* targeted = std::get_if<TargetedHello>(&*dec.message);
  if (session) h = &session->hello;
  if (targeted) h = &targeted->hello;
  if (!h) return "bad_type";
  if (h->instance == instance_) return reject(RejectReason::kSelf, h->nonce);
  if (served >= opts_.responder_max_qps) return reject(RejectReason::kBusy, h->nonce);
  // Sessions: only with a shared secret, and within the responder's memory bound.
  if (session && opts_.secret.empty()) return reject(RejectReason::kNoSecret, h->nonce);
  if (session && session_bytes + session->buffer_bytes > opts_.session_max_bytes) return reject(RejectReason::kBusy, h->nonce);
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
  if (!send_frame(fd, encode_frame(a, opts_.secret, h->nonce), deadline)) return "io";
  return session ? "ok_session" : "ok";
}

// Accepts one connection and answers its hello (a connected QP joins `served`) or its port
// request (the connection closes once the table is sent).
void Responder::accept_one(std::vector<std::unique_ptr<ServedQp>>& served, std::size_t& session_bytes) {
  Fd fd(accept4(listen_.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (fd.fd < 0) return;
  auto s = std::make_unique<ServedQp>();
  s->fd = std::move(fd);
  const std::string result = answer_hello(*s, served.size(), session_bytes);
  {
    std::lock_guard lock(mu_);
    ++handshakes_[result];
  }
  if (result == "port_table") return;
  if (result != "ok" && result != "ok_session") {
    spdlog::debug("prober: responder handshake failed: {}", result);
    return;
  }
  session_bytes += s->buf.size();
  served.push_back(std::move(s));
  ++qps_;
}

void Responder::main() {
  std::vector<std::unique_ptr<ServedQp>> served;
  std::size_t session_bytes = 0;  // buffers of the sessions served now
  for (;;) {
    std::vector<pollfd> pfds{{stop_.fd, POLLIN, 0}, {listen_.fd, POLLIN, 0}};
    for (const auto& s : served) pfds.push_back({s->fd.fd, POLLIN, 0});
    int n = ::poll(pfds.data(), pfds.size(), -1);
    if (n < 0 && errno != EINTR) break;
    if (pfds[0].revents) break;
    // A served connection that becomes readable is closed by the prober (or misbehaves): free it.
    for (std::size_t i = served.size(); i-- > 0;) {
      if (!pfds[i + 2].revents) continue;
      std::uint8_t buf[64];
      ssize_t k = ::recv(served[i]->fd.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      session_bytes -= served[i]->buf.size();
      served.erase(served.begin() + static_cast<std::ptrdiff_t>(i));
      --qps_;
    }
    if (pfds[1].revents & POLLIN) accept_one(served, session_bytes);
    cpu_.store(thread_cpu_seconds(), std::memory_order_relaxed);
  }
  qps_ -= served.size();
}

}  // namespace rdma::collectors::prober
