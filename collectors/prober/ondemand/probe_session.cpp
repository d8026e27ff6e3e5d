#include "collectors/prober/ondemand/probe_session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <regex>

#include "collectors/prober/wire/handshake.h"

namespace rdma::collectors::prober {

namespace {
using Clock = std::chrono::steady_clock;
constexpr double kPeakWindow = 0.1;  // seconds, rdma_probe_peak_bandwidth_bytes_per_second

std::uint64_t random_instance() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) | rd();
}
}  // namespace

struct ProbeSession::Qp {
  Fd fd;  // kept open for the probe: closing it tells the responder to free its side
  ibv_qp* qp = nullptr;
  Endpoint remote;
  std::uint64_t posted = 0, completed = 0;
  ~Qp() {
    if (qp) ibv_destroy_qp(qp);
  }
};

ProbeSession::ProbeSession(const ProbeModule& m, const ProbeTarget& t, const SessionOptions& o) : m_(m), t_(t), o_(o) {}

std::unique_ptr<ProbeSession> ProbeSession::open(const ProbeModule& m, const ProbeTarget& t, const SessionOptions& o,
                                                 std::string& reason) {
  std::unique_ptr<ProbeSession> s(new ProbeSession(m, t, o));
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) return reason = "no_local_port", nullptr;
  const std::regex re(o.device_regex.empty() ? ".*" : o.device_regex);
  bool inactive = false;  // a port the request named (or of the device it named) is not ACTIVE
  for (int i = 0; i < n && !s->ctx_; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    if (!std::regex_match(name, re) || (!t.device.empty() && name != t.device)) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) continue;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0)
      for (const auto& p : query_ports(ctx, attr.phys_port_cnt)) {
        if (t.port && p.num != t.port) continue;
        if (!p.active) {  // a DOWN or INIT port cannot carry a probe: say so rather than time out
          inactive = inactive || !t.device.empty() || t.port;
          continue;
        }
        const int g = choose_source_gid(ctx, p, -1, t.address, s->gid_);
        if (g < 0 && !p.ib) continue;  // RoCE without a GID of the target's family
        s->ctx_ = ctx, s->device_ = name, s->port_ = p, s->sgid_ = g;
        break;
      }
    if (!s->ctx_) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (!s->ctx_) return reason = inactive ? "port_not_active" : "no_local_port", nullptr;
  // Every QP writes from one buffer; the CQ holds every write that can be outstanding.
  const int cqe = static_cast<int>(m.qps * m.tx_depth + 16);
  s->pd_ = ibv_alloc_pd(s->ctx_);
  s->cq_ = s->pd_ ? ibv_create_cq(s->ctx_, cqe, nullptr, nullptr, 0) : nullptr;
  s->buf_.assign(m.size, 0x5a);
  // The access flags as an int: verbs.h's ibv_reg_mr macro ANDs them with an enumerator of
  // another enum, which C++20 deprecates (clang warns).
  s->mr_ = s->cq_ ? ibv_reg_mr(s->pd_, s->buf_.data(), s->buf_.size(), int{IBV_ACCESS_LOCAL_WRITE}) : nullptr;
  if (!s->mr_) return reason = "verbs_setup", nullptr;
  return s;
}

ProbeSession::~ProbeSession() {
  qps_.clear();  // QPs before the CQ and PD; their TCP connections close with them
  if (mr_) ibv_dereg_mr(mr_);
  if (cq_) ibv_destroy_cq(cq_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

// One handshake: challenge, session hello, accept; then the QP to RTS. Returns a reason or "".
std::string ProbeSession::connect(Qp& q, Deadline deadline, std::string& peer) {
  const Deadline d = std::min(deadline, Clock::now() + o_.handshake_timeout);
  std::string why;
  q.fd = tcp_connect(t_.address, t_.tcp_port, d, why);
  if (q.fd.fd < 0) return why == "connect" ? "no_responder" : why;
  auto challenge = read_frame(q.fd.fd, d, why);
  if (!challenge) return why;
  auto ch = decode_frame(*challenge, o_.secret, {});
  // The challenge is signed with the responder's secret: a bad mac means another secret.
  if (ch.status == DecodeStatus::kBadMac) return "wrong_secret";
  if (ch.status != DecodeStatus::kOk || !std::holds_alternative<Challenge>(*ch.message)) return "handshake_bad_challenge";
  const Nonce server_nonce = std::get<Challenge>(*ch.message).nonce;
  q.qp = create_qp(pd_, cq_, m_.tx_depth);
  if (!q.qp) return "qp_create";
  SessionHello sh;
  sh.kind = m_.kind == ProbeKind::kWriteBandwidth ? SessionKind::kWriteBandwidth : SessionKind::kWriteLatency;
  sh.buffer_bytes = m_.size;
  Hello& h = sh.hello;
  h.nonce = random_nonce();
  h.instance = random_instance();  // never the local responder's: probing oneself is allowed
  h.name = o_.node_name.substr(0, kNameSize);
  h.endpoint.gid = gid_;
  h.endpoint.qpn = q.qp->qp_num;
  h.endpoint.psn = random_psn();
  h.endpoint.lid = port_.lid;
  h.endpoint.mtu = port_.mtu;
  h.endpoint.is_global = port_.ib ? 0 : 1;
  if (!send_frame(q.fd.fd, encode_frame(sh, o_.secret, server_nonce), d)) return "handshake_io";
  auto reply = read_frame(q.fd.fd, d, why);
  // A responder closes without an answer when it does not know session hellos (an older
  // version) or could not verify ours.
  if (!reply) return why == "handshake_io" ? "no_session_support" : why;
  auto dec = decode_frame(*reply, o_.secret, h.nonce);
  if (dec.status != DecodeStatus::kOk) return "handshake_" + std::string(decode_status_label(dec.status));
  if (auto* rej = std::get_if<Reject>(&*dec.message)) return "rejected_" + std::string(reject_label(rej->reason));
  auto* acc = std::get_if<Accept>(&*dec.message);
  if (!acc) return "handshake_bad_type";
  if (acc->endpoint.length < m_.size) return "handshake_short_buffer";
  if (auto err = connect_qp(q.qp, port_, sgid_, h.endpoint.psn, acc->endpoint, {m_.traffic_class, m_.service_level}); !err.empty()) return err;
  q.remote = acc->endpoint;
  peer = acc->name;
  return "";
}

void ProbeSession::run(Deadline deadline, ProbeResult& r) {
  r.device = device_;
  r.port = port_.num;
  for (std::uint32_t i = 0; i < m_.qps; ++i) {
    qps_.push_back(std::make_unique<Qp>());
    if (auto why = connect(*qps_.back(), deadline, r.peer); !why.empty()) {
      r.reason = why;
      r.target_failure = true;
      return;
    }
  }
  r.reason = m_.kind == ProbeKind::kWriteBandwidth ? run_bandwidth(deadline, r) : run_latency(deadline, r);
  r.success = r.reason.empty();
}

namespace {
int post_write(ibv_qp* qp, const ibv_mr* mr, const std::vector<std::uint8_t>& buf, const Endpoint& remote, std::uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), static_cast<std::uint32_t>(buf.size()), mr->lkey};
  ibv_send_wr wr = signaled_write(sge, remote, wr_id), *bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}
}  // namespace

// Every QP keeps tx_depth signaled writes in flight until it has posted `iterations` (or the
// duration is over); bandwidth = bytes completed / (last completion - first post).
std::string ProbeSession::run_bandwidth(Deadline deadline, ProbeResult& r) {
  const auto t0 = Clock::now();
  const auto stop_posting = m_.duration.count() ? t0 + m_.duration : Deadline::max();
  std::vector<std::uint64_t> windows;
  auto last = t0;
  ibv_wc wc[64];
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return "timeout";
    bool outstanding = false;
    for (std::size_t i = 0; i < qps_.size(); ++i) {
      Qp& q = *qps_[i];
      const auto more = [&] { return m_.iterations ? q.posted < m_.iterations : now < stop_posting; };
      while (q.posted - q.completed < m_.tx_depth && more()) {
        if (post_write(q.qp, mr_, buf_, q.remote, i)) return "post";
        ++q.posted;
      }
      outstanding = outstanding || q.posted > q.completed;
    }
    if (!outstanding) break;
    const int k = ibv_poll_cq(cq_, 64, wc);
    if (k < 0) return "poll";
    if (k == 0) continue;
    last = Clock::now();
    const auto w = static_cast<std::size_t>(std::chrono::duration<double>(last - t0).count() / kPeakWindow);
    if (windows.size() <= w) windows.resize(w + 1, 0);
    for (int j = 0; j < k; ++j) {
      if (wc[j].status != IBV_WC_SUCCESS) return wc_reason(wc[j].status);
      ++qps_[wc[j].wr_id]->completed;
      ++r.writes;
      r.bytes += m_.size;
      windows[w] += m_.size;
    }
  }
  const double seconds = std::chrono::duration<double>(last - t0).count();
  r.bandwidth = seconds > 0 ? static_cast<double>(r.bytes) / seconds : 0;
  r.peak_bandwidth = peak_bandwidth(windows, kPeakWindow, seconds);
  return "";
}

// One signaled write at a time, polled without sleeping (as ib_write_lat): RTT = completion
// seen - post started.
std::string ProbeSession::run_latency(Deadline deadline, ProbeResult& r) {
  Qp& q = *qps_.front();
  r.rtts.reserve(m_.iterations);
  ibv_wc wc;
  for (std::uint64_t i = 0; i < m_.iterations; ++i) {
    const auto t = Clock::now();
    if (t >= deadline) return "timeout";
    if (post_write(q.qp, mr_, buf_, q.remote, 0)) return "post";
    int k = 0;
    for (std::uint32_t spins = 0; (k = ibv_poll_cq(cq_, 1, &wc)) == 0; ++spins)
      if ((spins & 1023) == 1023 && Clock::now() >= deadline) return "timeout";
    const auto done = Clock::now();
    if (k < 0) return "poll";
    if (wc.status != IBV_WC_SUCCESS) return wc_reason(wc.status);
    r.rtts.push_back(std::chrono::duration<double>(done - t).count());
    ++r.writes;
    r.bytes += m_.size;
  }
  std::sort(r.rtts.begin(), r.rtts.end());
  return "";
}

}  // namespace rdma::collectors::prober
