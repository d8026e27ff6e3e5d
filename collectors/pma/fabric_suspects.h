// Suspect links on InfiniBand, by intersection: each probed pair's route from the forwarding
// tables (fabric_routes.h) becomes a TracedFlow whose path is the ports it crosses, and
// rdma::model::suspect_links names the links that the lossy pairs cross and no clean pair does.
// Routes from tables have no unanswered hop and never change under a flow between two table
// reads, so there is no fresh trace: a flow is its route. Only cables are named: the (ingress,
// egress) pairs inside a switch that the port path also yields are dropped.
//
// Where loss comes from: the per-node probers know which pairs lose; the fabric-mode exporter knows
// the routes. The fleet-wide join is Prometheus' (docs/fabric.md); this function is the same
// computation on one answer, for /pma/routes/suspects (an operator, or a test, gives the verdicts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectors/pma/fabric_routes.h"
#include "sources/model/suspect_links.h"

namespace rdma::collectors::pma {

struct PairLoss {
  std::uint64_t src_guid = 0;
  std::uint8_t src_port = 0;
  std::uint16_t dst_lid = 0;
  bool lossy = false;
  std::string group;  // e.g. the rail; "" = one group
};
struct IbSuspects {
  std::vector<model::SuspectLink> suspects;  // cables only, as suspect_links orders them
  // Beside each suspect: true when a route of its group crosses a switch that routes adaptively
  // (RouteHop::adaptive). The intersection then ran over the tables' static fallback routes: a
  // lossy flow may not have crossed the suspect, a clean one may have, so the suspect is a lead,
  // never strict (even with clean_flows 0).
  std::vector<bool> adaptive;
  std::vector<std::string> unrouted;         // pairs whose route is an error (not in the intersection)
};
IbSuspects ib_suspects(const Topology& topo, const ForwardingTables& t, const std::vector<PairLoss>& pairs,
                       const model::SuspectSettings& s = {});
std::string suspects_json(const IbSuspects& s);

// "<GUID>/<port>-<LID>,..." as /pma/routes/suspects takes pairs; nullopt on a malformed item.
std::optional<std::vector<PairLoss>> parse_pairs(std::string_view list, bool lossy);

}  // namespace rdma::collectors::pma
