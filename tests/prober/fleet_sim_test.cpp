// The fleet simulator's small case (bench/prober/fleet_sim.h): 64 nodes on 8 leaves and 4 spines,
// every node running the real engine, trace scheduler and localization at the collector's
// defaults, one fault of each kind, the fleet rule (two or more nodes name the link) evaluated on
// the nodes' suspect series. What it asserts is what the product gives today (docs/prober.md,
// "Fleet simulation"): no fault ever makes the rule name a wrong link; a bad NIC and a dead node
// are blamed on that node within a minute; a fabric link fault is not named by the topology plan
// at these defaults (one flow per link: a lossy link is read as its peer), while a full mesh with
// four flows per link names a dead uplink within a minute, nothing wrong in that minute.
#include <catch2/catch.hpp>

#include <string>

#include "bench/prober/fleet_sim.h"

using namespace rdma::bench;

namespace {

FleetConfig small(FaultKind kind) {
  FleetConfig c;
  c.nodes = 64;
  c.leaf_size = 8;
  c.spines = 4;
  c.fault = kind;
  c.seed = 1;
  c.warmup_s = 90;
  c.horizon_s = 90;
  return c;
}

std::string links(const std::set<NamedLink>& s) {
  std::string out;
  for (const auto& l : s) out += l.from + "->" + l.to + " ";
  return out;
}

}  // namespace

TEST_CASE("fleet_sim: 64 nodes, topology plan, defaults: no fault names a wrong link, a bad NIC or dead node is blamed within a minute",
          "[fleet_sim]") {
  for (const auto kind : kAllFaults) {
    INFO(fault_name(kind));
    const FleetResult r = run_fleet(small(kind));
    INFO("wrong links: " << links(r.wrong_links));
    CHECK_FALSE(r.wrong);
    // The nodes probe: every node its own leaf's 7 peers and about one remote one, each once a second.
    CHECK(r.probes_per_node_s > 6.5);
    CHECK(r.trace_packets_per_node_s > 0);
    if (end_fault(kind)) {
      REQUIRE(r.named_after);
      CHECK(*r.named_after <= 60);
      CHECK(r.exact);
    } else {
      // One flow per link: the flows over the bad link are all of their peer's, which localize()
      // reads as that peer (a `peer` verdict), so no suspect link is computed and the rule names
      // nothing. This fails, and the documented table must change, the day the plan names it.
      CHECK_FALSE(r.named_after);
    }
  }
}

TEST_CASE("fleet_sim: 64 nodes, full mesh, 4 flows per link: a dead leaf uplink is named within a minute, no wrong link in that minute",
          "[fleet_sim]") {
  auto c = small(FaultKind::kDeadUplink);
  c.design = Design::kSample;  // 63 peers: under max_peers, every node probes every other
  c.flows = 4;
  c.horizon_s = 60;
  const FleetResult r = run_fleet(c);
  REQUIRE(r.named_after);
  CHECK(*r.named_after <= 60);
  CHECK(r.max_nodes_naming >= 2);
  // Flows that lose only their ACKs over the dead cable pass their fresh traces and name nothing.
  // Watched longer (120 s), wrong spine -> leaf links are named too (docs/prober.md, Fleet
  // simulation): this asserts the first minute only.
  INFO("wrong links: " << links(r.wrong_links));
  CHECK_FALSE(r.wrong);
  CHECK(r.exact);
}
