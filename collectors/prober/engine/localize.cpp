#include "collectors/prober/engine/localize.h"

#include <algorithm>
#include <map>
#include <set>

namespace rdma::collectors::prober {

bool flow_judged(const FlowOutcome& f, const LocalizeSettings& s) { return f.local_port_up && f.sent >= s.min_probes && f.sent > 0; }

bool flow_lossy(const FlowOutcome& f, const LocalizeSettings& s) {
  // lost / sent, correctly rounded, equals loss_ratio at the boundary (3 of 60 at 0.05)
  return flow_judged(f, s) && f.lost >= s.min_lost &&
         static_cast<double>(f.lost) / static_cast<double>(f.sent) >= s.loss_ratio;
}

namespace {

std::string port_key(const FlowOutcome& f) { return f.device + "/" + std::to_string(f.port); }


struct Tally {
  std::size_t judged = 0, lossy = 0;
  std::set<std::string> peers;  // local port: the peers of its judged flows
  bool all_lossy() const { return judged > 0 && lossy == judged; }
  bool partly_lossy() const { return lossy > 0 && lossy < judged; }
};

Finding localize_rail(const std::string& rail, const std::vector<const FlowOutcome*>& flows, const LocalizeSettings& s) {
  Finding out;
  out.rail = rail;
  out.flows = flows.size();

  // Local ports: down is state (blamed, its flows explained, never a fault of its peers). Up and
  // losing every judged flow is the port when that is towards two or more peers, or when each of
  // its peers answers another local port of the rail cleanly. Towards a single peer and nothing
  // else, the same picture is that peer's port on this rail as much as ours: the peer test gets it.
  std::set<std::string> down;
  std::map<std::string, Tally> by_port;
  std::map<std::string, std::set<std::string>> clean_from;  // peer -> local ports with a clean flow to it
  for (const auto* f : flows) {
    if (!f->local_port_up) {
      down.insert(port_key(*f));
      continue;
    }
    if (!flow_judged(*f, s)) continue;
    auto& t = by_port[port_key(*f)];
    ++t.judged;
    out.judged++;
    if (flow_lossy(*f, s)) ++t.lossy, ++out.lossy;
    else clean_from[f->peer].insert(port_key(*f));
    t.peers.insert(f->peer);
  }
  std::set<std::string> blamed_ports = down;
  for (const auto& [port, t] : by_port) {
    if (!t.all_lossy()) continue;
    bool others_reach = true;
    for (const auto& peer : t.peers) {
      auto c = clean_from.find(peer);
      others_reach = others_reach && c != clean_from.end() && !c->second.empty();
    }
    if (t.peers.size() >= 2 || others_reach) blamed_ports.insert(port);
  }

  // Peers, over the flows the local ports do not explain: every one of them lossy.
  std::map<std::string, Tally> by_peer;
  std::map<std::string, std::map<std::string, Tally>> links;  // local port -> peer -> its flows
  for (const auto* f : flows) {
    if (!flow_judged(*f, s) || blamed_ports.count(port_key(*f))) continue;
    auto& t = by_peer[f->peer];
    auto& l = links[port_key(*f)][f->peer];
    ++t.judged, ++l.judged;
    if (flow_lossy(*f, s)) ++t.lossy, ++l.lossy;
  }
  for (const auto& [peer, t] : by_peer)
    if (t.all_lossy()) out.peers.push_back(peer);

  // Path, seen from one local port: some flows lossy and others clean towards path_min_peers of
  // the peers it probes (all of them, when it probes fewer): the flows that cross the bad link
  // while the others do not. Per local port, the peers it probes are its rail's even where the
  // rails carry no label.
  for (const auto& [port, peers] : links) {
    std::size_t partly = 0;
    for (const auto& [peer, t] : peers) partly += t.partly_lossy() ? 1 : 0;
    const std::size_t need = std::max<std::size_t>(1, std::min(s.path_min_peers, peers.size()));
    out.path = out.path || partly >= need;
  }

  out.local_ports.assign(blamed_ports.begin(), blamed_ports.end());
  out.local_port = !out.local_ports.empty();
  out.peer = !out.peers.empty();
  out.verdict = out.local_port ? Verdict::kLocalPort : out.peer ? Verdict::kPeer : out.path ? Verdict::kPath : Verdict::kNone;
  return out;
}

}  // namespace

std::string_view verdict_label(Verdict v) {
  switch (v) {
    case Verdict::kNone: return "none";
    case Verdict::kLocalPort: return "local_port";
    case Verdict::kPeer: return "peer";
    case Verdict::kPath: return "path";
  }
  return "none";
}

std::vector<Finding> localize(const std::vector<FlowOutcome>& flows, const LocalizeSettings& s) {
  std::map<std::string, std::vector<const FlowOutcome*>> rails;
  for (const auto& f : flows) rails[f.rail].push_back(&f);
  std::vector<Finding> out;
  out.reserve(rails.size());
  for (const auto& [rail, fs] : rails) out.push_back(localize_rail(rail, fs, s));
  return out;
}

void write_localization_metrics(const std::vector<Finding>& findings, const std::vector<FlowOutcome>& flows,
                                const LocalizeSettings& s, exporter::MetricSink& out) {
  static constexpr std::string_view kVerdictHelp =
      "Fault localization over the last window, per rail: 1 for each kind of fault found (local_port, peer, path), "
      "none = 1 when there is none (docs/prober.md).";
  static constexpr std::string_view kBlamedHelp =
      "Present while a local port (device/port) or a peer is blamed on the rail by the last window's verdict.";
  for (const auto& f : findings) {
    const std::pair<Verdict, bool> kinds[] = {{Verdict::kNone, !(f.local_port || f.peer || f.path)},
                                              {Verdict::kLocalPort, f.local_port},
                                              {Verdict::kPeer, f.peer},
                                              {Verdict::kPath, f.path}};
    for (auto [v, on] : kinds)
      out.gauge_u64("rdma_prober_verdict", kVerdictHelp, {{"rail", f.rail}, {"verdict", std::string(verdict_label(v))}},
                    on ? 1 : 0);
    for (const auto& p : f.local_ports)
      out.gauge_u64("rdma_prober_blamed", kBlamedHelp, {{"rail", f.rail}, {"verdict", "local_port"}, {"subject", p}}, 1);
    for (const auto& p : f.peers)
      out.gauge_u64("rdma_prober_blamed", kBlamedHelp, {{"rail", f.rail}, {"verdict", "peer"}, {"subject", p}}, 1);
  }
  // Per link (local port x peer x peer port): how many of its flows were judged and how many of
  // those were lossy; a path fault shows as links with 0 < lossy < judged.
  struct Count {
    std::uint64_t judged = 0, lossy = 0;
  };
  std::map<std::tuple<std::string, unsigned, std::string, std::string, unsigned>, Count> links;
  for (const auto& f : flows) {
    auto& c = links[{f.device, f.port, f.peer, f.peer_device, f.peer_port}];
    c.judged += flow_judged(f, s) ? 1 : 0;
    c.lossy += flow_lossy(f, s) ? 1 : 0;
  }
  for (const auto& [k, c] : links) {
    const auto& [device, port, peer, peer_device, peer_port] = k;
    exporter::Labels l{{"device", device}, {"port", std::to_string(port)}, {"peer", peer},
                       {"peer_device", peer_device}, {"peer_port", std::to_string(peer_port)}};
    out.gauge_u64("rdma_prober_link_flows_judged",
                  "Flows of the link with enough probes in the last localization window to be judged.", l, c.judged);
    out.gauge_u64("rdma_prober_link_flows_lossy",
                  "Flows of the link that were lossy in the last localization window (min_lost and loss_ratio).", l,
                  c.lossy);
  }
}

}  // namespace rdma::collectors::prober
