#include "collectors/prober/engine/trace_book.h"

#include <algorithm>

#include "collectors/common/suspect_series.h"

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

}  // namespace rdma::collectors::prober
