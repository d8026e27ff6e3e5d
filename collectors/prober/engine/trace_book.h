// What the prober keeps of its flows' traces (path_tracer: trace_packet.h), and how they become
// suspect links (sources/model/suspect_links.h) and their series. Pure and bounded: at most
// kMaxTracedFlows flows, kMaxHops hops per trace, kMaxPathsPerLink distinct paths per link.
//
// A trace of a flow taken while the flow was clean is its `path` (the last one wins); one taken
// after it turned lossy is its `fresh` trace (dropped again when the flow is clean again, so a
// healed flow reads as clean at the next window). The flow's source address goes first, so the
// first link (source -> first router) can be named too.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "collectors/prober/engine/localize.h"
#include "exporter/metrics.h"
#include "sources/model/suspect_links.h"

namespace rdma::collectors::prober {

// "peer/device/port/peer_device/peer_port#flow": one flow of one link.
std::string flow_id(const FlowOutcome& f);
// The link part of it (without "#flow"): the key of the distinct paths seen.
std::string link_id(const FlowOutcome& f);

class TraceBook {
 public:
  static constexpr std::size_t kMaxTracedFlows = 4096, kMaxHops = 16, kMaxPathsPerLink = 256;
  // A finished trace of `flow`: `hops` from its first router on ("*" unanswered), `complete` when
  // it answered up to the destination's known distance. `lossy` = the flow was lossy when traced.
  // Returns false when the book is full (a new flow beyond kMaxTracedFlows: not kept).
  bool record(const FlowOutcome& flow, const std::string& source, std::vector<std::string> hops, bool complete, bool lossy);
  // The flow is gone (its link closed, its QP rotated to a new 5-tuple): its traces go with it.
  void forget(const std::string& flow_id);
  // A flow judged clean again: its fresh trace is dropped.
  void cleared(const std::string& flow_id);
  // The suspect_links() input for the last window: every flow of `window` that has a clean trace
  // (or a fresh one), lossy as `lossy_flows` (flow ids) say; group = the rail.
  std::vector<model::TracedFlow> traced(const std::vector<FlowOutcome>& window, const std::set<std::string>& lossy_flows) const;
  // Distinct paths seen per link (link_id), clean traces of all its flows over the book's life.
  const std::map<std::string, std::set<std::vector<std::string>>>& paths_seen() const { return paths_; }
  std::size_t flows() const { return by_flow_.size(); }
  // The traces kept of a flow (source address first), nullptr when none.
  struct FlowTraces {
    std::vector<std::string> path, fresh;
    bool fresh_complete = false;
  };
  const FlowTraces* find(const std::string& flow_id) const {
    auto it = by_flow_.find(flow_id);
    return it == by_flow_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, FlowTraces> by_flow_;
  std::map<std::string, std::set<std::vector<std::string>>> paths_;
};

// The suspect_links() input of one window: on the rails whose verdict (`findings`) includes path,
// its judged flows that the book has traces of, lossy or clean by the window's rule. A flow with
// too few probes to be judged (just connected, reconnecting) is neither: counting it clean could
// clear the broken link it crosses and leave a wrong one named.
// Flows in `waiting` (lossy, their fresh trace not back) take no part either.
std::vector<model::TracedFlow> window_traced_flows(const std::vector<FlowOutcome>& window,
                                                   const std::vector<Finding>& findings, const TraceBook& book,
                                                   const LocalizeSettings& s, const std::set<std::string>& waiting = {});

// Per rail rdma_prober_suspect_link{rail,from,to} (lossy flows explained) and
// rdma_prober_suspect_link_clean_flows{rail,from,to}; per link rdma_prober_link_paths_seen{device,
// port,peer,peer_device,peer_port} (distinct paths its flows were traced on).
void write_suspect_metrics(const std::vector<model::SuspectLink>& suspects, const TraceBook& book,
                           const std::vector<FlowOutcome>& window, exporter::MetricSink& out);

struct Snapshot;
// What stands behind the suspects and what keeps them back: per suspect
// rdma_prober_suspect_link_named_timestamp_seconds{rail,from,to} and
// rdma_prober_suspect_link_narrowed{rail,from,to}; per rail of the window
// rdma_prober_rail_spraying{rail} and rdma_prober_suspects_withheld{rail}; and
// rdma_prober_trace_disagreements_total (repeated traces of one 5-tuple on different paths).
void write_suspect_evidence(const Snapshot& s, exporter::MetricSink& out);

}  // namespace rdma::collectors::prober
