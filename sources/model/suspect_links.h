// Naming the broken link (docs/prober.md, "What the prober can and cannot tell apart"): from the
// hop lists of flows that lose and flows that do not, the links that explain the loss. One pure
// function for both fabrics: RoCE flows carry the hops their TTL-limited traces answered from,
// InfiniBand pairs the route read from the switches' forwarding tables.
//
// The rule: a link is a suspect when lossy flows cross it and no clean flow of the same group
// does (a link that carries clean traffic is not dropping it). The suspects are chosen as a greedy
// cover of the lossy flows -- the link that explains most lossy flows first, ties all kept -- so
// one bad link is named alone and two bad links on different paths are both named. A fresh trace
// that stops early (the drop also eats the tracer's packets, which hash as the flow does) narrows
// its flow to the link after its last answered hop; one that passes (answers as far as the clean
// trace did, or reaches the destination) shows that the flow's own direction carries its packets,
// and the flow names nothing: its loss is on the way back, which only the other side traces.
#pragma once

#include <compare>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::model {

// A hop that did not answer (a TTL that timed out, a router that does not send ICMP errors).
inline constexpr std::string_view kUnansweredHop = "*";

struct TracedFlow {
  std::string group;  // e.g. the rail: suspects are computed per group
  std::string id;     // the flow, for tests and logs ("peer/device/port#flow")
  bool lossy = false;
  // Hops of its last trace taken while the flow was clean, source side first; "*" = no answer.
  // A tracer puts the flow's own source address first, so that the first link (source -> first
  // hop) can be named. Routes from forwarding tables (InfiniBand) have no "*".
  std::vector<std::string> path;
  // A trace taken after the flow turned lossy (empty: none). When it stops early on `path` -- the
  // same hop as `path` at every position both answered, every later hop unanswered -- the flow is
  // narrowed to the link after its last answered hop. When it passes -- answers on `path` as far
  // as `path` answered, or reaches the destination (fresh_complete) -- the flow names nothing:
  // its direction carries its packets. One that differs from `path` or goes further is a new
  // path: stopped early it names nothing either.
  std::vector<std::string> fresh_path;
  bool fresh_complete = false;
};

struct HopLink {
  std::string from, to;
  auto operator<=>(const HopLink&) const = default;
};

struct SuspectLink {
  std::string group;
  HopLink link;
  std::size_t lossy_flows = 0;  // lossy flows of the group whose candidates include it
  std::size_t clean_flows = 0;  // clean flows of the group that cross it (0: a strict suspect)
  bool narrowed = false;        // named because fresh traces stopped right before it
  std::vector<std::string> lossy_ids;  // the ids of the lossy flows it explains (lossy_flows of them)
};

struct SuspectSettings {
  std::size_t max_suspects_per_group = 4;  // a bound on the series, and on what a human reads
};

// Links of a path: consecutive pairs of answered, distinct hops; a pair with "*" on either side
// is no link (nothing names it). Each link once, in path order.
std::vector<HopLink> path_links(const std::vector<std::string>& path);

// Per group, the suspects as described above; lossy flows no candidate explains (every link they
// cross also carries clean flows, or their path is unknown) name nothing. Sorted by group, then
// lossy_flows descending, then link.
std::vector<SuspectLink> suspect_links(const std::vector<TracedFlow>& flows, const SuspectSettings& s = {});

}  // namespace rdma::model
