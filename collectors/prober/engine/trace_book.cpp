#include "collectors/prober/engine/trace_book.h"

#include <algorithm>

#include "collectors/common/suspect_series.h"
#include "collectors/prober/engine/engine.h"

namespace rdma::collectors::prober {

std::string link_id(const FlowOutcome& f) {
  return f.peer + "/" + f.device + "/" + std::to_string(f.port) + "/" + f.peer_device + "/" + std::to_string(f.peer_port);
}
std::string flow_id(const FlowOutcome& f) { return link_id(f) + "#" + std::to_string(f.flow); }

bool TraceBook::record(const FlowOutcome& flow, const std::string& source, std::vector<std::string> hops, bool complete,
                       bool lossy) {
  const auto id = flow_id(flow);
  auto it = by_flow_.find(id);
  if (it == by_flow_.end()) {
    if (by_flow_.size() >= kMaxTracedFlows) return false;
    it = by_flow_.emplace(id, FlowTraces{}).first;
  }
  if (hops.size() > kMaxHops) hops.resize(kMaxHops);
  hops.insert(hops.begin(), source);
  if (lossy) {
    it->second.fresh = std::move(hops);
    it->second.fresh_complete = complete;
  } else {
    auto& seen = paths_[link_id(flow)];
    if (seen.size() < kMaxPathsPerLink) seen.insert(hops);
    it->second.path = std::move(hops);
    it->second.fresh.clear();
    it->second.fresh_complete = false;
  }
  return true;
}

void TraceBook::forget(const std::string& id) { by_flow_.erase(id); }

void TraceBook::cleared(const std::string& id) {
  if (auto it = by_flow_.find(id); it != by_flow_.end()) it->second.fresh.clear(), it->second.fresh_complete = false;
}

std::vector<model::TracedFlow> TraceBook::traced(const std::vector<FlowOutcome>& window,
                                                 const std::set<std::string>& lossy_flows) const {
  std::vector<model::TracedFlow> out;
  for (const auto& f : window) {
    const auto id = flow_id(f);
    auto it = by_flow_.find(id);
    if (it == by_flow_.end() || (it->second.path.empty() && it->second.fresh.empty())) continue;
    model::TracedFlow t;
    t.group = f.rail;
    t.id = id;
    t.lossy = lossy_flows.count(id) > 0;
    t.path = it->second.path;
    if (t.lossy) t.fresh_path = it->second.fresh, t.fresh_complete = it->second.fresh_complete;
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<model::TracedFlow> window_traced_flows(const std::vector<FlowOutcome>& window,
                                                   const std::vector<Finding>& findings, const TraceBook& book,
                                                   const LocalizeSettings& s, const std::set<std::string>& waiting) {
  std::set<std::string> path_rails, lossy;
  for (const auto& f : findings)
    if (f.path) path_rails.insert(f.rail);
  std::vector<FlowOutcome> judged;
  for (const auto& f : window)
    if (path_rails.count(f.rail) && flow_judged(f, s) && !waiting.count(flow_id(f))) {
      if (flow_lossy(f, s)) lossy.insert(flow_id(f));
      judged.push_back(f);
    }
  return book.traced(judged, lossy);
}

void write_suspect_metrics(const std::vector<model::SuspectLink>& suspects, const TraceBook& book,
                           const std::vector<FlowOutcome>& window, exporter::MetricSink& out) {
  write_suspect_links(suspects,
                      {"rdma_prober_suspect_link",
                       "A link (from, to: hop addresses) that the rail's lossy flows cross and no clean flow does: the "
                       "lossy flows it explains (docs/prober.md).",
                       "rdma_prober_suspect_link_clean_flows", "Clean flows of the rail that cross the suspect link (0: strict)."},
                      out);
  std::set<std::string> done;
  for (const auto& f : window) {
    const auto id = link_id(f);
    if (!done.insert(id).second) continue;
    const auto it = book.paths_seen().find(id);
    out.gauge_u64("rdma_prober_link_paths_seen",
                  "Distinct paths (hop lists) the link's flows were traced on while clean, since start (coverage).",
                  {{"device", f.device}, {"port", std::to_string(f.port)}, {"peer", f.peer}, {"peer_device", f.peer_device},
                   {"peer_port", std::to_string(f.peer_port)}},
                  it == book.paths_seen().end() ? 0 : it->second.size());
  }
}

void write_suspect_evidence(const Snapshot& s, exporter::MetricSink& out) {
  for (const auto& e : s.evidence) {
    const exporter::Labels l{{"rail", e.link.group}, {"from", e.link.link.from}, {"to", e.link.link.to}};
    out.gauge("rdma_prober_suspect_link_named_timestamp_seconds",
              "When the suspect link was first named, in an unbroken run of windows naming it (Unix seconds).", l,
              e.named_unix);
    out.gauge("rdma_prober_suspect_link_narrowed",
              "1: fresh traces of the lossy flows stopped right before the link; 0: named by the intersection alone (the "
              "lossy flows' paths less the links clean flows cross).",
              l, e.link.narrowed ? 1.0 : 0.0);
  }
  for (const auto& f : s.findings) {
    out.gauge("rdma_prober_rail_spraying",
              "1 when repeated traces of one 5-tuple on the rail answered from different hops recently (per-packet "
              "spraying, adaptive routing, or a route change): the rail's suspect links are withheld.",
              {{"rail", f.rail}}, s.spraying.count(f.rail) ? 1.0 : 0.0);
    const auto w = s.withheld.find(f.rail);
    out.gauge_u64("rdma_prober_suspects_withheld",
                  "Suspect links of the last window not named because the rail sprays (rdma_prober_rail_spraying).",
                  {{"rail", f.rail}}, w == s.withheld.end() ? 0 : w->second);
  }
  out.counter("rdma_prober_trace_disagreements_total",
              "Repeated traces of one 5-tuple (a lossy flow's fresh trace, a new clean one) that answered from a "
              "different hop where both answered.",
              {}, s.spray_evidence);
}

}  // namespace rdma::collectors::prober
