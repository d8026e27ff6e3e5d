#include "collectors/prober/engine/topology_plan.h"

#include "collectors/prober/engine/pinglist_plan.h"

namespace rdma::collectors::prober {

PlanStatus membership_peers(std::vector<std::pair<std::string, std::string>> node_leaf, const std::string& node,
                            std::uint64_t rotation, std::uint64_t seed, std::uint16_t port, std::vector<PeerSpec>& peers) {
  PlanStatus st;
  st.rotation = rotation;
  const PlanFabric fabric = make_plan_fabric(std::move(node_leaf));
  st.nodes = fabric.nodes;
  st.leaves = fabric.leaves.size();
  st.leaf_pairs = st.leaves * (st.leaves - (st.leaves > 0 ? 1 : 0)) / 2;
  // One plan for every rail of the node: the engine probes each peer on every paired rail.
  const PinglistPlan plan = plan_pinglist(fabric, "", node, rotation, seed);
  if (!plan.found) {
    st.state = "node_not_found";
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

PlanStatus topology_peers(std::string_view text, const std::string& node, std::uint64_t rotation, std::uint64_t seed,
                          std::uint16_t port, std::vector<PeerSpec>& peers, std::vector<slurm::TopologyError>& errors) {
  auto topo = slurm::parse_topology_conf(text);
  const std::uint64_t file_errors = topo.errors.size();
  errors = std::move(topo.errors);
  std::vector<std::pair<std::string, std::string>> members;
  members.reserve(topo.nodes.size());
  for (auto& n : topo.nodes) members.emplace_back(std::move(n.node), std::move(n.leaf));
  PlanStatus st = membership_peers(std::move(members), node, rotation, seed, port, peers);
  st.file_errors = file_errors;
  if (st.state == "node_not_found" && st.leaves == 0 && file_errors > 0) st.state = "file_error";
  return st;
}

}  // namespace rdma::collectors::prober
