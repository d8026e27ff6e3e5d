#include "collectors/prober/engine/topology_plan.h"

#include "collectors/prober/engine/pinglist_plan.h"

namespace rdma::collectors::prober {

// The plan of `node` from the topology file's text in `rotation`, appended to `peers` as static
// entries (names resolved like the static list's; group: the peer's leaf).
PlanStatus topology_peers(std::string_view text, const std::string& node, std::uint64_t rotation, std::uint64_t seed,
                          std::uint16_t port, std::vector<PeerSpec>& peers, std::vector<slurm::TopologyError>& errors) {
  PlanStatus st;
  st.rotation = rotation;
  auto topo = slurm::parse_topology_conf(text);
  st.file_errors = topo.errors.size();
  errors = std::move(topo.errors);
  std::vector<std::pair<std::string, std::string>> members;
  members.reserve(topo.nodes.size());
  for (auto& n : topo.nodes) members.emplace_back(std::move(n.node), std::move(n.leaf));
  const PlanFabric fabric = make_plan_fabric(std::move(members));
  st.leaves = fabric.leaves.size();
  st.leaf_pairs = st.leaves * (st.leaves - (st.leaves > 0 ? 1 : 0)) / 2;
  // One plan for every rail of the node: the engine probes each peer on every paired rail.
  const PinglistPlan plan = plan_pinglist(fabric, "", node, rotation, seed);
  if (!plan.found) {
    st.state = fabric.leaves.empty() && st.file_errors > 0 ? "file_error" : "node_not_found";
    return st;
  }
  st.state = "active";
  st.local = plan.local;
  st.remote = plan.remote;
  for (const auto& p : plan.peers) {
    PeerSpec spec;
    spec.name = p.node;
    spec.address = p.node;
    spec.tcp_port = port;
    spec.group = fabric.leaves[p.leaf].name;
    spec.source = "topology";
    peers.push_back(std::move(spec));
  }
  return st;
}

}  // namespace rdma::collectors::prober
