#include "bench/prober/fleet_sim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <queue>
#include <random>
#include <unordered_map>

#include "collectors/prober/engine/engine.h"
#include "collectors/prober/engine/pinglist_plan.h"
#include "collectors/prober/engine/trace_scheduler.h"
#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/wire/trace_packet.h"

namespace rdma::bench {

using namespace rdma::collectors::prober;
using namespace std::chrono_literals;

const char* fault_name(FaultKind k) {
  switch (k) {
    case FaultKind::kDropUp: return "drop leaf->spine";
    case FaultKind::kDropDown: return "drop spine->leaf";
    case FaultKind::kDropBoth: return "drop both ways";
    case FaultKind::kDeadUplink: return "dead leaf uplink";
    case FaultKind::kFlap: return "flapping link";
    case FaultKind::kBadNic: return "bad NIC";
    case FaultKind::kDeadNode: return "dead node";
    case FaultKind::kTwoFaults: return "two faults";
    case FaultKind::kAdaptive: return "adaptive routing + drop";
  }
  return "?";
}

bool end_fault(FaultKind k) { return k == FaultKind::kBadNic || k == FaultKind::kDeadNode; }

const char* design_name(Design d) { return d == Design::kPlan ? "plan" : "sample"; }

namespace {

std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }

// A directed cable: node -> its leaf, leaf -> node, leaf -> spine, spine -> leaf.
enum : std::uint64_t { kNodeUp = 1, kNodeDown = 2, kLeafUp = 3, kSpineDown = 4 };
std::uint64_t cable(std::uint64_t type, std::uint64_t a, std::uint64_t b = 0) { return type << 56 | a << 24 | b; }

struct Fault {
  double fraction = 1;
  bool flapping = false;
};

const TimePoint kStart = TimePoint{} + std::chrono::hours(1);
const std::string kDevice = "mlx5_0", kRail = "0";

struct Fleet;

// One node's verbs side: connects and port tables answer at once (a dead peer never does), a
// probe completes unless the fabric drops its WRITE or its ACK.
struct NodeTransport final : Transport {
  Fleet* fleet = nullptr;
  std::size_t self = 0;
  std::unordered_map<std::uint64_t, ConnectRequest> links;
  std::uint64_t posts = 0;
  void connect(const ConnectRequest& r) override;
  void pair(std::uint64_t request, const PeerSpec& peer) override;
  std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string& reason) override;
  void close(std::uint64_t link) override { links.erase(link); }
};

// The node's scheduler clock: it runs ahead of the fleet's while a trace waits for answers.
struct NodeTime {
  TimePoint now = kStart;
};

// One node's socket tracer: each TTL's packet crosses the flow's cables up to that hop and the
// router's answer crosses the cables back; a silent RoCE destination answers nothing.
struct NodeTracer final : PathTracer {
  Fleet* fleet = nullptr;
  std::size_t self = 0;
  NodeTime* time = nullptr;
  TraceOutcome trace(const TraceTarget& t, const TraceOptions& o, const TracePacer& pace) override;
};

struct Node {
  std::size_t index = 0, leaf = 0;
  std::string name, address;
  Gid gid{};
  NodeTransport transport;
  NodeTime time;
  NodeTracer tracer;
  std::unique_ptr<TraceScheduler> sched;
  std::unique_ptr<Engine> engine;
  std::size_t phase = 0;  // random-sample design: where its sorted peer list starts
  bool dead = false;
  bool wake = true;
  TimePoint next{};
};

struct Pending {
  TimePoint at;
  std::uint64_t seq;
  std::size_t node;
  TransportEvent event;
  bool operator>(const Pending& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

struct Fleet {
  FleetConfig cfg;
  std::size_t leaves = 0;
  std::vector<std::uint64_t> leaf_salt;
  std::vector<std::unique_ptr<Node>> nodes;
  std::unordered_map<std::string, std::size_t> by_address;
  std::unordered_map<std::uint64_t, Fault> faults;
  bool faults_on = false, spraying = false;
  std::size_t dead_node = ~std::size_t{0};
  TimePoint now = kStart, fault_at{};
  std::mt19937_64 rng;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> pending;
  std::uint64_t seq = 0;
  PlanFabric plan_fabric;

  std::string leaf_address(std::size_t l) const { return "172.16." + std::to_string(l >> 8) + "." + std::to_string(l & 255); }
  std::string spine_address(std::size_t s) const { return "172.17.0." + std::to_string(s); }

  void post(std::size_t node, TransportEvent e) {
    const auto at = e.at;
    pending.push(Pending{at, ++seq, node, std::move(e)});
  }

  // The spine leaf `l` sends a packet of this 5-tuple to (a fresh draw per packet where it sprays).
  std::size_t spine_of(std::size_t l, std::uint64_t tuple) {
    if (spraying) return std::uniform_int_distribution<std::size_t>(0, cfg.spines - 1)(rng);
    return mix(tuple ^ leaf_salt[l]) % cfg.spines;
  }
  static std::uint64_t tuple(std::size_t src, std::size_t dst, std::uint16_t sport, std::uint64_t proto = 17) {
    return mix(mix(src * 0x9e3779b97f4a7c15ull ^ dst) ^ (std::uint64_t{sport} << 8 | proto));
  }
  // The routers (leaf, spine, leaf; or the one leaf) and the cables of a packet src -> dst.
  void route(std::size_t src, std::size_t dst, std::uint64_t t, std::vector<std::uint64_t>& cables,
             std::vector<std::string>* routers, std::size_t* spine = nullptr) {
    const std::size_t ls = nodes[src]->leaf, ld = nodes[dst]->leaf;
    cables.clear();
    cables.push_back(cable(kNodeUp, src));
    if (routers) routers->assign({leaf_address(ls)});
    if (ls != ld) {
      const std::size_t s = spine_of(ls, t);
      if (spine) *spine = s;
      cables.push_back(cable(kLeafUp, ls, s));
      cables.push_back(cable(kSpineDown, s, ld));
      if (routers) {
        routers->push_back(spine_address(s));
        routers->push_back(leaf_address(ld));
      }
    }
    cables.push_back(cable(kNodeDown, dst));
  }
  bool active(const Fault& f) const {
    if (!faults_on) return false;
    if (!f.flapping) return true;
    const auto in = std::chrono::duration<double>(now - fault_at).count();
    return std::fmod(in, 60.0) < 15.0;
  }
  // Whether one packet over these cables (the first `count` of them) arrives.
  bool passes(const std::vector<std::uint64_t>& cables, std::size_t count) {
    for (std::size_t i = 0; i < count && i < cables.size(); ++i) {
      const auto f = faults.find(cables[i]);
      if (f == faults.end() || !active(f->second)) continue;
      if (f->second.fraction >= 1 || std::uniform_real_distribution<double>(0, 1)(rng) < f->second.fraction) return false;
    }
    return true;
  }
  bool alive(std::size_t n) const { return !nodes[n]->dead; }

  // The peers of node n now, as the collector hands them to its engine.
  std::vector<PeerSpec> peers_of(std::size_t n, std::uint64_t rotation) const {
    std::vector<PeerSpec> out;
    const auto spec = [&](std::size_t j, std::string name) {
      PeerSpec p;
      p.name = std::move(name);
      p.address = nodes[j]->address;
      p.tcp_port = 9662;
      p.group = cfg.design == Design::kPlan ? "leaf" + std::to_string(nodes[j]->leaf) : "";
      p.source = cfg.design == Design::kPlan ? "topology" : "dns";
      out.push_back(std::move(p));
    };
    if (cfg.design == Design::kPlan) {
      const auto plan = plan_pinglist(plan_fabric, "", nodes[n]->name, rotation, 0);
      for (const auto& p : plan.peers) spec(by_address.at(p.node), p.node);
    } else {
      // Every node sorts the same DNS answer; its sample starts where its start time put it.
      const std::size_t count = nodes.size();
      for (std::size_t a = 0; a < count; ++a) {
        const std::size_t j = (a + nodes[n]->phase) % count;
        if (j == n) continue;
        char name[32];
        std::snprintf(name, sizeof name, "a%06zu", a);
        spec(j, name);
      }
    }
    return out;
  }
  // The fabric node a peer name of node n's engine stands for.
  std::size_t resolve(std::size_t n, const std::string& name) const {
    if (name.size() > 1 && name[0] == 'a') return (std::stoul(name.substr(1)) + nodes[n]->phase) % nodes.size();
    return by_address.at(name);
  }
};

std::size_t peer_of(const Fleet& f, const ConnectRequest& r) { return f.by_address.at(r.peer.address); }

void NodeTransport::connect(const ConnectRequest& r) {
  links[r.link] = r;
  const std::size_t peer = peer_of(*fleet, r);
  TransportEvent e;
  e.link = r.link;
  if (!fleet->alive(peer)) {
    // A TCP connect to a host that is gone: the SYNs go unanswered until the handshake times out.
    e.kind = TransportEvent::Kind::kConnectFailed;
    e.reason = "connect";
    e.at = fleet->now + 5s;
    fleet->post(self, std::move(e));
    return;
  }
  e.kind = TransportEvent::Kind::kConnected;
  e.at = fleet->now + 1ms;
  TraceTarget t;
  t.source = fleet->nodes[self]->gid;
  t.dest = fleet->nodes[peer]->gid;
  t.sport = flow_label_to_udp_sport(r.flow_label);
  t.dest_qpn = static_cast<std::uint32_t>(mix(r.link * 131 + self) & 0xffffff);
  e.trace = t;
  fleet->post(self, std::move(e));
}

void NodeTransport::pair(std::uint64_t request, const PeerSpec& peer) {
  const std::size_t p = fleet->by_address.at(peer.address);
  TransportEvent e;
  e.kind = TransportEvent::Kind::kPaired;
  e.link = request;
  if (!fleet->alive(p)) {
    e.ok = false;
    e.reason = "connect";
    e.at = fleet->now + 5s;
  } else {
    e.ok = true;
    e.at = fleet->now + 1ms;
    e.pairs.push_back(PeerPort{{kDevice, 1}, kDevice, 1, kRail, fleet->nodes[self]->gid, fleet->nodes[p]->gid});
  }
  fleet->post(self, std::move(e));
}

std::optional<TimePoint> NodeTransport::post_probe(std::uint64_t link, std::uint64_t probe, std::string&) {
  ++posts;
  const auto it = links.find(link);
  if (it == links.end()) return fleet->now;
  const std::size_t peer = peer_of(*fleet, it->second);
  if (!fleet->alive(peer)) return fleet->now;
  // The WRITE on the flow's 5-tuple, the ACK on the responder QP's (its own source port).
  std::vector<std::uint64_t> cables;
  const auto sport = flow_label_to_udp_sport(it->second.flow_label);
  fleet->route(self, peer, Fleet::tuple(self, peer, sport), cables, nullptr);
  if (!fleet->passes(cables, cables.size())) return fleet->now;
  const auto back_sport = static_cast<std::uint16_t>(0xC000 | (mix(link * 977 + self) & 0x3fff));
  fleet->route(peer, self, Fleet::tuple(peer, self, back_sport), cables, nullptr);
  if (!fleet->passes(cables, cables.size())) return fleet->now;
  TransportEvent e;
  e.kind = TransportEvent::Kind::kCompletion;
  e.link = link;
  e.probe = probe;
  e.ok = true;
  e.at = fleet->now + 10us;
  fleet->post(self, std::move(e));
  return fleet->now;
}

TraceOutcome NodeTracer::trace(const TraceTarget& t, const TraceOptions& o, const TracePacer& pace) {
  TraceOutcome out;
  const std::size_t peer = fleet->by_address.at(gid_address(t.dest));
  std::vector<std::string> answers;
  std::vector<std::uint64_t> cables, back;
  std::vector<std::string> routers;
  unsigned silent = 0;
  for (unsigned ttl = 1; ttl <= o.max_hops && silent < o.stop_after_silent; ++ttl) {
    if (!pace()) return {"stopped"};
    ++out.packets;
    // Each packet is routed on its own (a spraying leaf draws anew), as the flow's probes are.
    std::size_t spine = 0;
    fleet->route(self, peer, Fleet::tuple(self, peer, t.sport), cables, &routers, &spine);
    std::string answer;
    if (ttl <= routers.size() && fleet->passes(cables, ttl)) {
      // The router's time-exceeded back to us: from our leaf over our cable, from the spine over
      // its cable to our leaf, from the far leaf over a spine its hash picks for the ICMP packet.
      back.clear();
      const std::size_t ls = fleet->nodes[self]->leaf;
      if (ttl == 3) {
        const std::size_t s = fleet->spine_of(fleet->nodes[peer]->leaf, Fleet::tuple(peer, self, 0, 1));
        back.push_back(cable(kLeafUp, fleet->nodes[peer]->leaf, s));
        back.push_back(cable(kSpineDown, s, ls));
      } else if (ttl == 2) {
        back.push_back(cable(kSpineDown, spine, ls));
      }
      back.push_back(cable(kNodeDown, self));
      if (fleet->passes(back, back.size())) answer = routers[ttl - 1];
    }
    // A RoCE destination does not answer UDP 4791: its TTLs are silent as a lost answer.
    if (answer.empty()) {
      ++silent;
      time->now += o.hop_timeout;
    } else {
      silent = 0;
      ++out.answers;
      time->now += 1ms;
    }
    answers.push_back(answer);
  }
  out.hops = hop_list(answers);
  if (out.answers == 0) out.failure = "no_answer";
  return out;
}

EngineConfig engine_config(const FleetConfig& cfg, std::uint64_t seed) {
  // The collector's defaults (prober_collector.cpp settings_from and its option table).
  EngineConfig e;
  e.interval = 1s;
  e.jitter = 0.1;
  e.timeout = 1s;
  e.connect_timeout = 5s;
  e.backoff_max = 30s;
  e.backoff_initial = 1s;
  e.backoff_jitter = 0.5;
  e.connect_queue_limit = 20s;
  e.rotate_interval = 60s;
  e.max_peers = 64;
  e.sample_size = 64;
  e.max_links = 1024;
  e.flows = cfg.flows;
  e.flow_rotation = 60s;
  e.window = 30s;
  e.wake_grid = 50ms;
  e.pairing_refresh = 60s;
  e.seed = seed;
  return e;
}

}  // namespace

FleetResult run_fleet(const FleetConfig& cfg) {
  Fleet f;
  f.cfg = cfg;
  f.rng.seed(cfg.seed * 7919 + 17);
  f.leaves = (cfg.nodes + cfg.leaf_size - 1) / cfg.leaf_size;
  for (std::size_t l = 0; l < f.leaves; ++l) f.leaf_salt.push_back(mix(cfg.seed * 1000003 + l));
  std::vector<std::pair<std::string, std::string>> membership;
  for (std::size_t k = 0; k < cfg.nodes; ++k) {
    auto n = std::make_unique<Node>();
    n->index = k;
    n->leaf = k / cfg.leaf_size;
    char name[32];
    std::snprintf(name, sizeof name, "n%05zu", k);
    n->name = name;
    const std::size_t a = k + 1;
    n->address = "10." + std::to_string(a >> 16 & 255) + "." + std::to_string(a >> 8 & 255) + "." + std::to_string(a & 255);
    n->gid = *address_gid(n->address);
    n->phase = static_cast<std::size_t>(mix(cfg.seed ^ (k << 20)) % cfg.nodes);
    f.by_address[n->address] = k;
    f.by_address[n->name] = k;
    membership.emplace_back(n->name, "leaf" + std::to_string(n->leaf));
    f.nodes.push_back(std::move(n));
  }
  f.plan_fabric = make_plan_fabric(membership);

  // The fault: its place drawn from the seed.
  std::mt19937_64 place(cfg.seed * 104729 + static_cast<unsigned>(cfg.fault));
  const auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(place); };
  FleetResult r;
  const auto leaf_cable = [&](std::size_t l, std::size_t s, bool up, bool down, Fault fault) {
    if (up) {
      f.faults[cable(kLeafUp, l, s)] = fault;
      r.expected.insert({f.leaf_address(l), f.spine_address(s)});
    }
    if (down) {
      f.faults[cable(kSpineDown, s, l)] = fault;
      r.expected.insert({f.spine_address(s), f.leaf_address(l)});
    }
  };
  const std::size_t l1 = pick(f.leaves), s1 = pick(cfg.spines);
  std::size_t victim = pick(cfg.nodes);
  switch (cfg.fault) {
    case FaultKind::kDropUp: leaf_cable(l1, s1, true, false, {cfg.fraction}); break;
    case FaultKind::kDropDown: leaf_cable(l1, s1, false, true, {cfg.fraction}); break;
    case FaultKind::kDropBoth: leaf_cable(l1, s1, true, true, {cfg.fraction}); break;
    case FaultKind::kDeadUplink: leaf_cable(l1, s1, true, true, {1.0}); break;
    case FaultKind::kFlap: leaf_cable(l1, s1, true, true, {1.0, true}); break;
    case FaultKind::kAdaptive: leaf_cable(l1, s1, true, false, {cfg.fraction}); break;
    case FaultKind::kTwoFaults: {
      leaf_cable(l1, s1, true, false, {cfg.fraction});
      std::size_t l2 = pick(f.leaves - 1);
      if (l2 >= l1) ++l2;
      leaf_cable(l2, pick(cfg.spines), true, false, {cfg.fraction});
      break;
    }
    case FaultKind::kBadNic:
      f.faults[cable(kNodeUp, victim)] = {cfg.fraction};
      f.faults[cable(kNodeDown, victim)] = {cfg.fraction};
      break;
    case FaultKind::kDeadNode: f.dead_node = victim; break;
  }
  f.spraying = cfg.fault == FaultKind::kAdaptive;

  const double plan_rotation_s = 300;
  const double clock_phase = std::uniform_real_distribution<double>(0, plan_rotation_s)(place);
  const auto rotation_at = [&](TimePoint t) {
    return static_cast<std::uint64_t>((std::chrono::duration<double>(t - kStart).count() + clock_phase) / plan_rotation_s);
  };
  // Nodes start within one window of each other: their windows close at different times.
  for (auto& np : f.nodes) {
    Node& n = *np;
    n.transport.fleet = &f;
    n.transport.self = n.index;
    n.tracer.fleet = &f;
    n.tracer.self = n.index;
    n.tracer.time = &n.time;
    TraceScheduler::Clockwork clock{[t = &n.time] { return t->now; },
                                    [t = &n.time](TraceScheduler::Clock::time_point until) {
                                      t->now = std::max(t->now, until);
                                      return true;
                                    }};
    n.sched = std::make_unique<TraceScheduler>(TraceSchedulerConfig{}, n.tracer, clock);
    n.engine = std::make_unique<Engine>(engine_config(cfg, mix(cfg.seed * 31 + n.index) | 1), n.transport,
                                        std::vector<LocalPort>{{kDevice, 1}});
    n.engine->set_tracer(n.sched.get());
    n.next = kStart + std::chrono::milliseconds(static_cast<long>(std::uniform_real_distribution<double>(0, 30000)(place)));
  }
  const TimePoint fault_at = kStart + std::chrono::milliseconds(static_cast<long>(cfg.warmup_s * 1000));
  const TimePoint end = fault_at + std::chrono::milliseconds(static_cast<long>(cfg.horizon_s * 1000));
  f.fault_at = fault_at;
  r.fault_at = cfg.warmup_s;
  const auto step = 50ms;
  const auto eval_every = std::chrono::milliseconds(static_cast<long>(cfg.eval_s * 1000));
  TimePoint next_eval = kStart + eval_every;
  std::vector<bool> started(cfg.nodes, false);
  std::vector<std::uint64_t> rotation_of(cfg.nodes, ~0ull);
  const std::size_t victim_node = cfg.fault == FaultKind::kDeadNode || cfg.fault == FaultKind::kBadNic ? victim : ~std::size_t{0};
  std::uint64_t trace_packets = 0;

  for (; f.now < end; f.now += step) {
    if (!f.faults_on && f.now >= fault_at) {
      f.faults_on = true;
      if (f.dead_node < cfg.nodes) {
        // Its prober stops with it: what it had sent is not counted after this.
        f.nodes[f.dead_node]->dead = true;
        trace_packets += f.nodes[f.dead_node]->sched->counters().packets;
      }
    }
    while (!f.pending.empty() && f.pending.top().at <= f.now) {
      Pending p = f.pending.top();
      f.pending.pop();
      Node& n = *f.nodes[p.node];
      if (n.dead || !started[p.node]) continue;
      n.engine->handle(p.event);
      n.wake = true;
    }
    for (auto& np : f.nodes) {
      Node& n = *np;
      if (n.dead) continue;
      if (!started[n.index]) {
        if (f.now < n.next) continue;
        started[n.index] = true;
        n.wake = true;
      }
      const auto rot = cfg.design == Design::kPlan ? rotation_at(f.now) : 0;
      if (rot != rotation_of[n.index]) {
        rotation_of[n.index] = rot;
        n.engine->set_peers(f.peers_of(n.index, rot), f.now);
        n.wake = true;
      }
      // Traces run on the node's own clock, which a trace moves past the fleet's while it waits for
      // answers; the next one starts when the fleet has caught up.
      if (n.time.now <= f.now) {
        n.time.now = f.now;
        if (n.sched->run_next()) n.wake = true;
      }
      if (n.wake || f.now >= n.next) {
        n.engine->tick(f.now);
        n.next = n.engine->next_deadline(f.now);
        n.wake = false;
      }
    }
    if (f.now >= next_eval) {
      next_eval += eval_every;
      const double t = std::chrono::duration<double>(f.now - kStart).count();
      std::map<NamedLink, std::set<std::size_t>> naming;
      std::size_t blamers = 0;
      bool self_blamed = false;
      for (auto& np : f.nodes) {
        Node& n = *np;
        if (n.dead || !started[n.index]) continue;
        const Snapshot s = n.engine->snapshot();
        for (const auto& sl : s.suspects) {
          if (sl.lossy_flows == 0) continue;
          naming[{sl.link.from, sl.link.to}].insert(n.index);
          if (cfg.record_series) r.series.push_back({t, n.index, sl.group, sl.link.from, sl.link.to, double(sl.lossy_flows)});
        }
        for (const auto& [rail, w] : s.withheld) r.withheld += w;
        for (const auto& fd : s.findings) {
          if (n.index == victim_node && fd.local_port) self_blamed = true;
          for (const auto& p : fd.peers)
            if (f.resolve(n.index, p) == victim_node) {
              ++blamers;
              break;
            }
        }
      }
      std::map<NamedLink, std::size_t> rule;
      bool named = false;
      for (const auto& [link, who] : naming) {
        rule[link] = who.size();
        if (who.size() < 2) continue;
        if (r.expected.count(link) && f.faults_on) {
          named = true;
          r.max_nodes_naming = std::max(r.max_nodes_naming, who.size());
        } else {
          r.wrong = true;
          r.wrong_links.insert(link);
        }
      }
      // An end fault is named when the node blames its own port or two nodes blame it as their peer.
      if (end_fault(cfg.fault) && f.faults_on && (self_blamed || blamers >= 2)) named = true;
      if (named && !r.named_after) r.named_after = t - cfg.warmup_s;
      r.rule.emplace_back(t, std::move(rule));
    }
  }
  std::uint64_t posts = 0;
  for (auto& np : f.nodes) {
    posts += np->transport.posts;
    if (!np->dead) trace_packets += np->sched->counters().packets;
  }
  const double seconds = std::chrono::duration<double>(end - kStart).count();
  r.probes_per_node_s = static_cast<double>(posts) / static_cast<double>(cfg.nodes) / seconds;
  r.trace_packets_per_node_s = static_cast<double>(trace_packets) / static_cast<double>(cfg.nodes) / seconds;
  r.exact = r.named_after.has_value() && !r.wrong;
  return r;
}

}  // namespace rdma::bench
