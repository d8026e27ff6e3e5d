#include "collectors/prober/engine/engine.h"

#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/wire/trace_packet.h"

#include <algorithm>
#include <functional>
#include <set>

#include "sources/model/suspect_links.h"

namespace rdma::collectors::prober {

void Histogram::observe(const std::vector<double>& bounds, double v) {
  if (counts.size() != bounds.size() + 1) counts.assign(bounds.size() + 1, 0);
  auto it = std::lower_bound(bounds.begin(), bounds.end(), v);  // le semantics: v <= bound
  ++counts[static_cast<std::size_t>(it - bounds.begin())];
  ++count;
  sum += v;
}

Engine::Engine(EngineConfig cfg, Transport& transport, std::vector<LocalPort> locals)
    : cfg_(std::move(cfg)), transport_(transport), locals_(std::move(locals)),
      rng_(cfg_.seed ? cfg_.seed : std::random_device{}()),
      flow_salt_(cfg_.seed ? cfg_.seed : (std::uint64_t{std::random_device{}()} << 32 | std::random_device{}())) {
  if (cfg_.buckets.empty()) cfg_.buckets.assign(kDefaultBuckets.begin(), kDefaultBuckets.end());
  if (cfg_.sample_size == 0) cfg_.sample_size = 1;
  if (cfg_.max_in_flight == 0) cfg_.max_in_flight = 1;
  if (cfg_.flows == 0) cfg_.flows = 1;
  if (cfg_.window.count() <= 0) cfg_.window = std::chrono::milliseconds(30000);
  std::sort(locals_.begin(), locals_.end());
}

std::string Engine::stats_key(const PeerSpec& p, const LocalPort& l) const {
  const std::string port = l.device + "|" + std::to_string(l.port) + "|";
  return aggregated() ? "g|" + port + p.group : "p|" + port + p.name;
}

bool Engine::wanted(const PeerSpec& p, const LocalPort& l) const {
  if (!p.local_device.empty() && p.local_device != l.device) return false;
  return p.local_port == 0 || p.local_port == l.port;
}

void Engine::set_peers(std::vector<PeerSpec> peers, TimePoint now) {
  std::sort(peers.begin(), peers.end(), [](const PeerSpec& a, const PeerSpec& b) { return a.name < b.name; });
  peers.erase(std::unique(peers.begin(), peers.end(), [](const PeerSpec& a, const PeerSpec& b) { return a.name == b.name; }),
              peers.end());
  if (peers == peers_) return;
  peers_ = std::move(peers);
  // Pairs are a peer's as long as it keeps its name and responder; a peer that moved is asked anew.
  std::erase_if(pairing_, [this](const auto& kv) {
    auto p = std::lower_bound(peers_.begin(), peers_.end(), kv.first, [](const PeerSpec& a, const std::string& n) { return a.name < n; });
    return p == peers_.end() || p->name != kv.first || p->address != kv.second.address || p->tcp_port != kv.second.tcp_port;
  });
  std::erase_if(pair_requests_, [this](const auto& kv) { return !pairing_.count(kv.second); });
  rotated_at_ = now;
  rebuild_links();
  drop_stale();  // entries of the links closed
}

std::vector<const PeerSpec*> Engine::probed_peers() const {
  std::vector<const PeerSpec*> probed;
  if (!aggregated()) {
    for (const auto& p : peers_) probed.push_back(&p);
  } else {
    const std::size_t first = rotation_ % peers_.size();
    for (std::size_t i = 0; i < std::min(cfg_.sample_size, peers_.size()); ++i)
      probed.push_back(&peers_[(first + i) % peers_.size()]);
  }
  return probed;
}

void Engine::rebuild_links() {
  if (!peers_.empty()) rotation_ %= peers_.size();
  // A link per pair of a probed peer (once its ports are known) and flow. A peer new to the
  // probed set is asked for its ports at once, one that returns to it when its ask is due.
  std::set<LinkKey> want_keys;
  std::map<LinkKey, std::pair<const PeerSpec*, const PeerPort*>> spec_of;
  for (const auto* p : probed_peers()) {
    auto known = pairing_.find(p->name);
    if (known == pairing_.end()) next_ask_ = TimePoint::min();
    else if (!known->second.asked) next_ask_ = std::min(next_ask_, known->second.ask_at);
    if (known == pairing_.end() || !known->second.pairs) continue;
    for (const auto& pair : *known->second.pairs)
      if (wanted(*p, pair.local) && std::binary_search(locals_.begin(), locals_.end(), pair.local))
        for (unsigned f = 0; f < cfg_.flows; ++f) {
          LinkKey key{p->name, pair.local, pair.device, pair.port, f};
          want_keys.insert(key);
          spec_of[key] = {p, &pair};
        }
  }
  // Close links no longer wanted, or whose peer changed address or group.
  std::set<LinkKey> have;
  for (auto it = links_.begin(); it != links_.end();) {
    const Link& have_link = it->second;
    LinkKey key{have_link.peer.name, have_link.local, have_link.target.device, have_link.target.port, have_link.flow};
    auto s = spec_of.find(key);
    if (s == spec_of.end() || !(*s->second.first == have_link.peer) || !(*s->second.second == have_link.target) ||
        have_link.stats_key != stats_key(*s->second.first, have_link.local)) {
      for (const auto& pr : it->second.in_flight)
        if (!pr.expired && it->second.state == State::kUp) ++stats_of(it->second).lost;
      forget_traces(it->second);
      transport_.close(it->first);
      it = links_.erase(it);
    } else {
      have.insert(key);
      ++it;
    }
  }
  for (const auto& key : want_keys) {
    if (have.count(key)) continue;
    if (links_.size() >= cfg_.max_links) {
      ++link_limit_hits_;
      continue;
    }
    Link l;
    l.id = next_link_++;
    l.peer = *spec_of[key].first;
    l.target = *spec_of[key].second;
    l.local = std::get<1>(key);
    l.flow = std::get<4>(key);
    l.flow_label = link_flow_label(l);
    l.stats_key = stats_key(l.peer, l.local);
    l.stats = &stats_[l.stats_key];
    requeue(links_.emplace(l.id, std::move(l)).first->second);
  }
  // Per-peer statistics go with their link; group statistics stay while the group exists.
  std::set<std::string> keep;
  for (const auto& [id, l] : links_) keep.insert(l.stats_key);
  if (aggregated())
    for (const auto& p : peers_)
      for (const auto& l : locals_)
        if (wanted(p, l)) keep.insert(stats_key(p, l));
  std::erase_if(stats_, [&keep](const auto& kv) { return !keep.count(kv.first); });
}

TimePoint Engine::jittered(TimePoint from) {
  std::uniform_real_distribution<double> u(-cfg_.jitter, cfg_.jitter);
  auto d = std::chrono::duration_cast<Clock::duration>(Seconds(Seconds(cfg_.interval).count() * (1.0 + u(rng_))));
  return from + d;
}

std::chrono::milliseconds Engine::next_backoff(std::chrono::milliseconds last) const {
  return last.count() == 0 ? cfg_.backoff_initial : std::min(cfg_.backoff_max, last * 2);
}

std::chrono::milliseconds Engine::jittered_backoff(std::chrono::milliseconds b) {
  if (cfg_.backoff_jitter <= 0) return b;
  std::uniform_real_distribution<double> u(1.0 - std::min(1.0, cfg_.backoff_jitter), 1.0);
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(b.count()) * u(rng_)));
}

void Engine::teardown(Link& l, TimePoint now, const std::string& reason, bool fair) {
  auto& st = stats_of(l);
  if (!reason.empty()) ++st.errors[reason];
  transport_.close(l.id);
  l.state = State::kBackoff;
  if (!fair) {  // nothing was tried: retry soon, the link's record untouched
    l.retry_at = now + jittered_backoff(cfg_.backoff_initial);
    return requeue(l);
  }
  for (const auto& p : l.in_flight)
    if (!p.expired) ++st.lost, ++l.window_lost;
  l.in_flight.clear();
  l.last_ok = false;
  if (!l.failing) l.missed_next = now + cfg_.interval;
  l.failing = true;
  l.backoff = next_backoff(l.backoff);
  l.retry_at = now + jittered_backoff(l.backoff);
  requeue(l);
}

// A started handshake has connect_timeout (a fifth more with a transport that times its own
// handshakes, so that its reason is the one counted); a queued one connect_queue_limit.
TimePoint Engine::connect_deadline(const Link& l) const {
  if (!transport_.reports_connect_start()) return l.connect_started + cfg_.connect_timeout;
  if (!l.attempt_started) return l.connect_started + cfg_.connect_queue_limit;
  return l.connect_started + cfg_.connect_timeout + cfg_.connect_timeout / 5;
}

void Engine::park(Link& l) {
  if (l.state != State::kIdle && l.state != State::kSelf) transport_.close(l.id);
  l.in_flight.clear();  // neither lost nor late: the local port went away under them
  if (l.state != State::kSelf) l.state = State::kIdle;
  l.last_ok = true;
  l.failing = false;
  l.backoff = std::chrono::milliseconds(0);
  requeue(l);  // out of the heap until the port is ACTIVE again
}

void Engine::set_local_state(const LocalPort& local, bool up) {
  if (up == !down_.count(local)) return;
  if (up) {
    down_.erase(local);
    for (auto& [id, l] : links_)
      if (l.local == local) requeue(l);  // parked links are due again (kIdle connects at once)
  } else {
    down_.insert(local);
    for (auto& [id, l] : links_)
      if (l.local == local) park(l);
  }
  drop_stale();
}

void Engine::handle(const TransportEvent& e) {
  if (e.kind == TransportEvent::Kind::kPortState) return set_local_state(e.local, e.ok);
  if (e.kind == TransportEvent::Kind::kPaired) return handle_paired(e);
  auto it = links_.find(e.link);
  if (it == links_.end()) {
    if (e.kind == TransportEvent::Kind::kCompletion) ++late_;
    return;  // a link closed meanwhile
  }
  handle_link(it->second, e);
  drop_stale();
}

void Engine::handle_paired(const TransportEvent& e) {
  auto req = pair_requests_.find(e.link);
  if (req == pair_requests_.end()) return;  // the peer left or moved meanwhile
  auto it = pairing_.find(req->second);
  pair_requests_.erase(req);
  if (it == pairing_.end() || it->second.asked != e.link) return;
  auto& pp = it->second;
  pp.asked = 0;
  if (e.ok) {
    pp.backoff = std::chrono::milliseconds(0);
    pp.ask_at = e.at + cfg_.pairing_refresh;
    if (!pp.pairs || *pp.pairs != e.pairs) {
      pp.pairs = e.pairs;
      relink_ = true;  // once per wake-up, in tick(): answers come in bursts (every peer at start)
    }
  } else {
    // Known pairs stay: a peer that stopped answering keeps its links, which fail and count lost.
    ++pairing_failures_[e.reason.empty() ? "pairing" : e.reason];
    pp.backoff = next_backoff(pp.backoff);
    pp.ask_at = e.at + jittered_backoff(pp.backoff);
  }
  next_ask_ = std::min(next_ask_, pp.ask_at);
}

// Asks the probed peers whose ports are due to be (re)read; next_ask_ becomes the earliest
// ask_at of those not asked now.
void Engine::ask_pairings(TimePoint now) {
  next_ask_ = TimePoint::max();
  for (const auto* p : probed_peers()) {
    auto& pp = pairing_[p->name];
    if (pp.asked) continue;  // its answer comes (the transport's handshake has a deadline)
    if (now < pp.ask_at) {
      next_ask_ = std::min(next_ask_, pp.ask_at);
      continue;
    }
    pp.address = p->address, pp.tcp_port = p->tcp_port;
    pp.asked = next_pair_request_++;
    pair_requests_[pp.asked] = p->name;
    transport_.pair(pp.asked, *p);
  }
}

void Engine::handle_link(Link& l, const TransportEvent& e) {
  switch (e.kind) {
    case TransportEvent::Kind::kConnected:
      if (l.state != State::kConnecting) return;
      l.state = State::kUp;
      l.failing = false;
      if (e.trace) {
        l.trace_target = e.trace;
        // A new flow (first connect, or re-created by rotation) is traced; a reconnect that kept
        // the flow label kept its 5-tuple, so its trace stands.
        if (l.traced_label != l.flow_label) request_trace(l, false);
      }
      l.connect_seconds = std::max(0.0, Seconds(e.at - l.connect_started).count());
      ++stats_of(l).connects;
      l.last_ok = true;
      {
        std::uniform_real_distribution<double> u(0.0, 1.0);  // spread first probes over one interval
        l.next_probe = e.at + std::chrono::duration_cast<Clock::duration>(Seconds(Seconds(cfg_.interval).count() * u(rng_)));
      }
      requeue(l);
      return;
    case TransportEvent::Kind::kConnectStarted:
      if (l.state != State::kConnecting || l.attempt_started) return;
      l.attempt_started = true;
      l.connect_started = e.at;
      requeue(l);
      return;
    case TransportEvent::Kind::kConnectFailed:
      if (l.state != State::kConnecting) return;
      if (e.self) {
        transport_.close(l.id);
        l.state = State::kSelf;
        requeue(l);  // never due again
        return;
      }
      teardown(l, e.at, e.reason.empty() ? "connect" : e.reason);
      return;
    case TransportEvent::Kind::kPortState:
    case TransportEvent::Kind::kPaired: return;  // handled above
    case TransportEvent::Kind::kCompletion: {
      auto p = std::find_if(l.in_flight.begin(), l.in_flight.end(), [&e](const Probe& x) { return x.id == e.probe; });
      if (p == l.in_flight.end() || l.state != State::kUp) {
        ++late_;
        return;
      }
      Probe probe = *p;
      l.in_flight.erase(p);
      auto& st = stats_of(l);
      if (!e.ok) {
        if (!probe.expired) ++st.lost, ++l.window_lost;
        teardown(l, e.at, e.reason.empty() ? "completion_error" : e.reason);  // the QP is in error state now
        return;
      }
      if (probe.expired) {
        ++late_;
        return;
      }
      if (!l.queued || probe.deadline <= l.queued_at) requeue(l);  // its deadline may have been the link's due time
      const double rtt = std::max(0.0, Seconds(e.at - probe.posted).count());
      st.rtt.observe(cfg_.buckets, rtt);
      if (e.nic_seconds) {
        st.nic_rtt.observe(cfg_.buckets, *e.nic_seconds);
        st.host_overhead_seconds += std::max(0.0, rtt - *e.nic_seconds);
      }
      l.last_ok = true;
      l.backoff = std::chrono::milliseconds(0);
      return;
    }
  }
}

FlowOutcome Engine::outcome_of(const Link& l) const {
  FlowOutcome f;
  f.device = l.local.device;
  f.port = l.local.port;
  f.rail = l.target.rail;
  f.peer = l.peer.name;
  f.peer_device = l.target.device;
  f.peer_port = l.target.port;
  f.flow = l.flow;
  f.local_port_up = !down_.count(l.local);
  f.src_lid = l.target.source_lid;
  f.peer_lid = l.target.dest_lid;
  return f;
}

void Engine::close_window(TimePoint now) {
  last_window_.clear();
  const LocalizeSettings ls;
  for (auto& [id, l] : links_) {
    if (l.state == State::kSelf) continue;
    FlowOutcome f = outcome_of(l);
    f.sent = std::exchange(l.window_sent, 0);
    f.lost = std::exchange(l.window_lost, 0);
    // A flow that turned lossy is traced afresh (its drop may eat the tracer's packets, which
    // hash as the flow's: where its trace stops names the link); one judged clean again drops
    // its fresh trace, so a healed flow reads clean at once.
    const bool lossy = flow_lossy(f, ls);
    if (lossy && !l.lossy) l.fresh_pending = request_trace(l, true);
    if (!lossy && flow_judged(f, ls) && l.lossy) {
      book_.cleared(flow_id(f));
      l.fresh_pending = false;
      ++book_version_;
    }
    if (lossy || flow_judged(f, ls)) l.lossy = lossy;
    last_window_.push_back(std::move(f));
  }
  ++windows_;
  window_start_ = now;
}

bool Engine::request_trace(Link& l, bool fresh) {
  if (!tracer_ || !l.trace_target) return false;
  TraceJob j;
  j.link = l.id;
  j.flow_label = l.flow_label;
  j.local = l.local.device + "/" + std::to_string(l.local.port);
  j.target = *l.trace_target;
  j.options = cfg_.trace;  // nothing of an earlier trace: each learns the path anew
  j.fresh = fresh;
  if (!tracer_->request(std::move(j))) return false;
  l.traced_label = l.flow_label;
  return true;
}

void Engine::forget_traces(const Link& l) {
  if (!tracer_) return;
  tracer_->cancel(l.id);
  book_.forget(flow_id(outcome_of(l)));
  ++book_version_;
}

void Engine::take_traces(TimePoint now) {
  if (!tracer_) return;
  for (auto& d : tracer_->take_results()) {
    auto it = links_.find(d.job.link);
    if (it == links_.end() || it->second.flow_label != d.job.flow_label) continue;  // gone, or re-created since
    Link& l = it->second;
    const auto& o = d.outcome;
    l.trace_result = !o.failure.empty() ? o.failure : o.complete ? "complete" : "partial";
    if (d.job.fresh && l.fresh_pending) {  // whatever it found, the lossy flow may now be judged
      l.fresh_pending = false;
      ++book_version_;
    }
    l.traced_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (o.hops.empty()) continue;  // nothing answered: the flow's last path stands
    // A repeated trace of this 5-tuple (a lossy flow's fresh one, or a new clean one) that
    // answered another hop where both answered: the rail does not keep a 5-tuple on one path.
    const auto source = gid_address(d.job.target.source);
    if (const auto* before = book_.find(flow_id(outcome_of(l))); before && !before->path.empty()) {
      std::vector<std::string> after{source};
      after.insert(after.end(), o.hops.begin(), o.hops.end());
      note_spraying(l, before->path, after, now);
    }
    // A first trace that ends after the flow was judged lossy is no clean path (it is the fresh one).
    book_.record(outcome_of(l), source, o.hops, o.complete, d.job.fresh || l.lossy);
    ++book_version_;
  }
}

// Two hop lists of one 5-tuple disagree where both answered at the same distance: not one path.
// Unanswered hops ("*") and a list that ends early (a drop eats the rest) say nothing.
static bool disagree(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != model::kUnansweredHop && b[i] != model::kUnansweredHop && !a[i].empty() && !b[i].empty() && a[i] != b[i])
      return true;
  return false;
}

void Engine::note_spraying(const Link& l, const std::vector<std::string>& before, const std::vector<std::string>& after,
                           TimePoint now) {
  if (!disagree(before, after)) return;
  spray_seen_[l.target.rail] = now;
  ++spray_evidence_;
}

bool Engine::spraying(const std::string& rail, TimePoint now) const {
  auto it = spray_seen_.find(rail);
  return it != spray_seen_.end() && now - it->second < kSprayHoldWindows * cfg_.window;
}

void Engine::judge_window(TimePoint now) {
  judged_.windows = windows_;
  judged_.book_version = book_version_;
  const LocalizeSettings ls;
  judged_.findings = localize(last_window_, ls);
  judged_.states.clear();
  for (const auto& f : last_window_)
    judged_.states[flow_id(f)] = flow_lossy(f, ls) ? "lossy" : flow_judged(f, ls) ? "clean" : "unjudged";
  judged_.spraying.clear();
  for (const auto& [rail, at] : spray_seen_)
    if (spraying(rail, now)) judged_.spraying.insert(rail);
  std::map<std::tuple<std::string, std::string, std::string>, double> named;
  for (const auto& e : judged_.evidence) named[{e.link.group, e.link.link.from, e.link.link.to}] = e.named_unix;
  judged_.evidence.clear();
  judged_.withheld.clear();
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // A lossy flow whose fresh trace is still out waits: that trace is the second look at its
  // 5-tuple that tells a sprayed rail (above) and may narrow it to one link.
  std::set<std::string> waiting;
  for (const auto& [id, l] : links_)
    if (l.fresh_pending) waiting.insert(flow_id(outcome_of(l)));
  for (auto& l : model::suspect_links(window_traced_flows(last_window_, judged_.findings, book_, ls, waiting))) {
    if (judged_.spraying.count(l.group)) {
      ++judged_.withheld[l.group];
      continue;
    }
    auto it = named.find({l.group, l.link.from, l.link.to});
    const double since = it == named.end() ? unix_now : it->second;
    judged_.evidence.push_back({std::move(l), since});
  }
}

std::uint32_t Engine::link_flow_label(const Link& l) const {
  const auto key = l.peer.name + "/" + l.local.device + "/" + std::to_string(l.local.port) + "/" + l.target.device + "/" +
                   std::to_string(l.target.port);
  return choose_flow_label(link_seed(key) ^ flow_salt_, l.flow, cfg_.flows, l.rotations);
}

// One flow index per turn: each link re-creates that flow's QP (a new QP number, hence a new UDP
// source port); the link's other flows keep probing meanwhile. With one flow nothing rotates.
void Engine::rotate_flows(TimePoint now) {
  flows_rotated_at_ = now;
  if (cfg_.flows < 2) return;
  const unsigned turn = static_cast<unsigned>(flow_turn_++ % cfg_.flows);
  for (auto& [id, l] : links_)
    if (l.flow == turn && l.state == State::kUp) {
      transport_.close(l.id);
      l.in_flight.clear();  // posted on the old QP: neither lost nor completed
      forget_traces(l);     // a new 5-tuple: another path
      l.trace_target.reset();
      l.lossy = false, l.trace_result.clear(), l.traced_unix = 0, l.fresh_pending = false;
      ++l.rotations;
      l.flow_label = link_flow_label(l);  // the next 5-tuple of this flow's slot
      l.state = State::kIdle;
      requeue(l);
    }
}

void Engine::tick(TimePoint now) {
  if (!started_) {
    started_ = true;
    window_start_ = flows_rotated_at_ = now;
  }
  take_traces(now);
  if (now - window_start_ >= cfg_.window) close_window(now);
  if (judged_.windows != windows_ || judged_.book_version != book_version_) judge_window(now);
  if (cfg_.flow_rotation.count() > 0 && now - flows_rotated_at_ >= cfg_.flow_rotation) rotate_flows(now);
  if (aggregated() && now - rotated_at_ >= cfg_.rotate_interval) {
    rotation_ += cfg_.sample_size;
    rotated_at_ = now;
    relink_ = true;
  }
  if (relink_) {
    relink_ = false;
    rebuild_links();
  }
  if (now >= next_ask_) ask_pairings(now);
  // The links due, in the order of their ids as a scan of links_ would take them (the order in
  // which they connect and post when several are due at once).
  batch_.clear();
  while (!due_.empty() && due_.front().at <= now) {
    const Due d = due_.front();
    std::pop_heap(due_.begin(), due_.end(), std::greater<>{});
    due_.pop_back();
    auto it = links_.find(d.link);
    if (it == links_.end() || it->second.queued != d.seq) continue;  // stale
    it->second.queued = 0;
    batch_.push_back(d.link);
  }
  std::sort(batch_.begin(), batch_.end());
  for (const auto id : batch_) {
    Link& l = links_.at(id);
    tick_link(l, now);
    requeue(l);
  }
  drop_stale();
}

void Engine::requeue(Link& l) {
  const TimePoint at = link_next(l, TimePoint::min());  // kIdle: due at once
  if (l.queued && l.queued_at == at) return;
  l.queued = 0;  // the old entry, if any, is stale now
  if (at == TimePoint::max()) return;  // parked or kSelf: due only when something happens to it
  l.queued = ++due_seq_;
  l.queued_at = at;
  due_.push_back({at, l.id, l.queued});
  std::push_heap(due_.begin(), due_.end(), std::greater<>{});
}

void Engine::drop_stale() {
  while (!due_.empty()) {
    const Due& d = due_.front();
    auto it = links_.find(d.link);
    if (it != links_.end() && it->second.queued == d.seq) return;
    std::pop_heap(due_.begin(), due_.end(), std::greater<>{});
    due_.pop_back();
  }
}

TimePoint Engine::global_next(TimePoint now) const {
  TimePoint next = std::min(now + std::chrono::hours(1), window_start_ + cfg_.window);
  if (cfg_.flow_rotation.count() > 0) next = std::min(next, flows_rotated_at_ + cfg_.flow_rotation);
  if (aggregated()) next = std::min(next, rotated_at_ + cfg_.rotate_interval);
  return std::min(next, next_ask_);
}

void Engine::tick_link(Link& l, TimePoint now) {
  if (down_.count(l.local)) return;  // parked
  if (l.failing && (l.state == State::kBackoff || l.state == State::kConnecting))
    for (; now >= l.missed_next; l.missed_next += cfg_.interval) ++l.window_sent, ++l.window_lost;
  switch (l.state) {
    case State::kSelf: break;
    case State::kBackoff:
      if (now < l.retry_at) break;
      [[fallthrough]];
    case State::kIdle:
      l.state = State::kConnecting;
      l.connect_started = now;
      l.attempt_started = !transport_.reports_connect_start();
      transport_.connect({l.id, l.peer, l.local, l.flow, l.target, l.flow_label});
      break;
    case State::kConnecting:
      if (now < connect_deadline(l)) break;
      if (l.attempt_started) teardown(l, now, "connect_timeout");
      else teardown(l, now, "connect_queued", false);
      break;
    case State::kUp: {
      auto& st = stats_of(l);
      for (auto& p : l.in_flight)
        if (!p.expired && now >= p.deadline) {
          p.expired = true;
          ++st.lost, ++l.window_lost;
          l.last_ok = false;
        }
      if (l.in_flight.size() >= cfg_.max_in_flight) {
        teardown(l, now, "stalled");
        break;
      }
      if (now < l.next_probe) break;
      const std::uint64_t probe = next_probe_++;
      std::string reason;
      auto posted = transport_.post_probe(l.id, probe, reason);
      if (!posted) {
        teardown(l, now, reason.empty() ? "post" : reason);
        break;
      }
      ++st.sent, ++l.window_sent;
      l.in_flight.push_back({probe, *posted, *posted + cfg_.timeout, false});
      l.next_probe = jittered(std::max(l.next_probe, now - cfg_.interval / 2));
      if (l.next_probe <= now) l.next_probe = jittered(now);
      break;
    }
  }
}

TimePoint Engine::link_next(const Link& l, TimePoint now) const {
  TimePoint next = TimePoint::max();
  if (down_.count(l.local)) return next;  // parked until the port's state changes
  switch (l.state) {
    case State::kSelf: break;
    case State::kIdle: return now;
    case State::kBackoff: next = l.retry_at; break;
    case State::kConnecting: next = connect_deadline(l); break;
    case State::kUp:
      next = l.next_probe;
      for (const auto& p : l.in_flight)
        if (!p.expired) next = std::min(next, p.deadline);
      break;
  }
  if (l.failing && (l.state == State::kBackoff || l.state == State::kConnecting)) next = std::min(next, l.missed_next);
  return next;
}

TimePoint Engine::next_deadline(TimePoint now) const {
  if (!started_ || relink_) return now;
  TimePoint next = global_next(now);
  if (!due_.empty()) next = std::min(next, due_.front().at);  // live: every change ends with drop_stale()
  if (next <= now) return now;
  if (cfg_.wake_grid.count() > 0) {
    const auto grid = std::chrono::duration_cast<Clock::duration>(cfg_.wake_grid);
    const auto since = next.time_since_epoch();
    next = TimePoint((since + grid - Clock::duration(1)) / grid * grid);
  }
  return next;
}

std::optional<Engine::State> Engine::state(const std::string& peer, const LocalPort& local, unsigned flow) const {
  for (const auto& [id, l] : links_)
    if (l.peer.name == peer && l.local == local && l.flow == flow) return l.state;
  return std::nullopt;
}

void Engine::traces_of(Snapshot& s) const {
  for (const auto& [id, l] : links_) {
    if (!l.trace_target && l.trace_result.empty()) continue;
    FlowTrace t;
    t.flow = outcome_of(l);
    t.flow_label = l.flow_label;
    if (l.trace_target) t.sport = l.trace_target->sport, t.dest_qpn = l.trace_target->dest_qpn;
    const auto fid = flow_id(t.flow);
    if (const auto* b = book_.find(fid)) t.path = b->path, t.fresh = b->fresh;
    if (auto st = judged_.states.find(fid); st != judged_.states.end()) t.state = st->second;
    t.result = l.trace_result;
    t.traced_unix = l.traced_unix;
    s.traces.push_back(std::move(t));
  }
  // The last window's answer as judge_window() computed it, all of a piece (with snapshot()'s
  // window and findings).
  s.evidence = judged_.evidence;
  for (const auto& e : judged_.evidence) s.suspects.push_back(e.link);
  s.spraying = judged_.spraying;
  s.withheld = judged_.withheld;
  s.spray_evidence = spray_evidence_;
  if (book_copied_ != book_version_ || !book_copy_) {
    book_copy_ = std::make_shared<const TraceBook>(book_);
    book_copied_ = book_version_;
  }
  s.book = book_copy_;
}

Snapshot Engine::snapshot() const {
  Snapshot s;
  s.aggregated = aggregated();
  s.buckets = cfg_.buckets;
  s.peers_known = peers_.size();
  s.links = links_.size();
  s.late_completions = late_;
  s.link_limit_hits = link_limit_hits_;
  for (const auto& l : locals_) s.local_ports.emplace_back(l, !down_.count(l));
  s.window = last_window_;
  s.windows = windows_;
  s.findings = judged_.findings;
  s.pairing_failures = pairing_failures_;
  for (const auto* p : probed_peers()) {
    auto pp = pairing_.find(p->name);
    const bool paired = pp != pairing_.end() && pp->second.pairs && !pp->second.pairs->empty();
    s.peers_unpaired += !paired;
    if (!s.aggregated) s.paired.emplace_back(p->name, paired);
  }
  std::map<std::string, std::size_t> peer_index;  // stats_key -> s.peers: a link's flows are one peer view
  std::map<std::string, GroupView> groups;
  if (s.aggregated)
    for (const auto& p : peers_)
      for (const auto& l : locals_)
        if (wanted(p, l)) {
          auto& g = groups[stats_key(p, l)];
          g.local = l, g.group = p.group;
          ++g.peers;
        }
  for (const auto& [id, l] : links_) {
    const bool up = l.state == State::kUp && l.last_ok;
    s.links_up += up;
    if (l.state == State::kSelf) {
      ++s.self_excluded;
      continue;
    }
    auto st = stats_.find(l.stats_key);
    if (s.aggregated) {
      auto& g = groups[l.stats_key];
      ++g.probed;
      g.up += up;
    } else {
      if (l.flow == 0) s.link_info.push_back({l.peer.name, l.target});
      auto [at, fresh] = peer_index.try_emplace(l.stats_key, s.peers.size());
      if (fresh) {
        s.peers.push_back({l.local, l.peer.name, l.peer.group, up, !down_.count(l.local), l.connect_seconds,
                           st == stats_.end() ? Stats{} : st->second});
      } else {
        auto& v = s.peers[at->second];
        v.up = v.up || up;
        v.connect_seconds = std::max(v.connect_seconds, l.connect_seconds);
      }
    }
  }
  for (auto& [key, g] : groups) {
    auto st = stats_.find(key);
    if (st != stats_.end()) g.stats = st->second;
    s.groups.push_back(std::move(g));
  }
  if (tracer_) traces_of(s);
  return s;
}

}  // namespace rdma::collectors::prober
