// A fleet simulator that runs the prober's own code for every node: the real Engine (links,
// windows, localize(), the trace book, suspect_links) and the real TraceScheduler (queue, token
// buckets, start pacing) per node, over a simulated transport and path tracer on one rail of a
// simulated two-tier Clos fabric (leaves of `leaf_size` nodes, every leaf cabled once to every
// spine, the leaf picking the spine by a hash of the flow's 5-tuple), with injected faults. A
// simulated clock advances in the collector's 50 ms wake grid; every `eval` the nodes' suspect
// links are read from their snapshots (what rdma_prober_suspect_link exports) and the shipped
// fleet rule is evaluated on them: a link is named fleet-wide when two or more nodes name it
// (rdma:fabric_suspect_link:nodes >= 2, the condition of RdmaFabricSuspectLink before its `for`).
//
// What is simulated, not run: the verbs transport (a probe is lost when a packet of the WRITE or
// of its ACK is dropped on the links its 5-tuple hashes onto; connects and port tables answer at
// once unless the peer is dead), the socket tracer (a TTL's packet crosses the flow's links up to
// that hop, the router answers over the way back, a silent RoCE destination answers nothing),
// the wall clock (the plan's rotation index is simulated seconds / plan_rotation) and DNS (the
// random-sample design's peer list is every other node, sorted as the engine sorts it; each node
// starts at its own phase of the list, as nodes started at different times do). Rails are
// independent fabrics and the engine judges per rail, so one rail is simulated: the per-node
// packet rates are per rail.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rdma::bench {

enum class FaultKind : std::uint8_t {
  kDropUp,      // a leaf -> spine link drops `fraction` of packets (that direction only)
  kDropDown,    // a spine -> leaf link drops `fraction`
  kDropBoth,    // a leaf <-> spine cable drops `fraction` both ways
  kDeadUplink,  // a leaf <-> spine cable drops everything both ways
  kFlap,        // a leaf <-> spine cable down (both ways) 15 s of every 60 s
  kBadNic,      // one node's NIC <-> leaf cable drops `fraction` both ways
  kDeadNode,    // one node stops: no prober, no responder, nothing forwarded to it
  kTwoFaults,   // two leaf -> spine links on different leaves drop `fraction`
  kAdaptive,    // kDropUp on a rail whose leaves spray per packet (adaptive routing)
};
inline constexpr FaultKind kAllFaults[] = {FaultKind::kDropUp,   FaultKind::kDropDown, FaultKind::kDropBoth,
                                           FaultKind::kDeadUplink, FaultKind::kFlap,   FaultKind::kBadNic,
                                           FaultKind::kDeadNode, FaultKind::kTwoFaults, FaultKind::kAdaptive};
const char* fault_name(FaultKind k);
// An end fault (a NIC, a node) has no fabric link to name: the right answer is the node blamed
// and no link named.
bool end_fault(FaultKind k);

enum class Design : std::uint8_t {
  kPlan,    // topology pinglist (the leaf membership): own leaf's mesh + one prober per leaf pair
  kSample,  // every node a peer, a sample of max_peers (64) probed at a time, rotated each minute
};
const char* design_name(Design d);

struct FleetConfig {
  std::size_t nodes = 64;
  std::size_t leaf_size = 8;
  std::size_t spines = 4;
  Design design = Design::kPlan;
  FaultKind fault = FaultKind::kDropUp;
  double fraction = 0.2;         // of packets dropped by a lossy link or NIC
  std::uint64_t seed = 1;        // the fault's place, the nodes' seeds, the window phases
  double warmup_s = 120;         // before the fault
  double horizon_s = 300;        // after the fault
  double eval_s = 15;            // rule evaluation interval
  unsigned flows = 1;            // the prober's `flows` (default 1)
  bool record_series = false;    // keep every node's suspect series per evaluation (FleetResult::series)
};

struct NamedLink {
  std::string from, to;
  auto operator<=>(const NamedLink&) const = default;
};

// One node's rdma_prober_suspect_link series at one evaluation.
struct SuspectSample {
  double t = 0;  // seconds since the simulation began
  std::size_t node = 0;
  std::string rail, from, to;
  double value = 0;
};

struct FleetResult {
  std::set<NamedLink> expected;        // the fault's directed links (either direction of a cable)
  std::optional<double> named_after;   // seconds from the fault to the first evaluation naming an expected link
  bool exact = false;                  // named an expected link (end fault: blamed the node), and nothing wrong
  bool wrong = false;                  // the rule named a link that is not the fault's (any time)
  std::set<NamedLink> wrong_links;
  std::size_t max_nodes_naming = 0;    // the most nodes that named an expected link at one evaluation
  double probes_per_node_s = 0, trace_packets_per_node_s = 0;
  std::uint64_t withheld = 0;          // suspects withheld as spraying, summed over evaluations and nodes
  std::vector<SuspectSample> series;   // with record_series
  // The rule's answer at each evaluation: (from, to) -> nodes naming it, the links named (>= 2).
  std::vector<std::pair<double, std::map<NamedLink, std::size_t>>> rule;
  double fault_at = 0;
};

FleetResult run_fleet(const FleetConfig& cfg);

}  // namespace rdma::bench
