// The topology pinglist's inputs, a Slurm topology.conf or the (node, leaf) pairs of Kubernetes
// node labels: this node's plan peers as peer entries beside the static list and DNS
// (pinglist_plan.h for the plan, sources/slurm for the file, node_leaves.h for the labels). Pure:
// the caller reads the file or the API and picks the rotation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collectors/prober/engine/engine.h"
#include "sources/slurm/topology_conf.h"

namespace rdma::collectors::prober {

// What the plan of this node is now (exported as rdma_prober_plan_*).
struct PlanStatus {
  std::string state = "off";  // off, active, file_error, api_error, node_not_found
  std::uint64_t leaves = 0, local = 0, remote = 0, leaf_pairs = 0, rotation = 0, file_errors = 0;
  std::uint64_t nodes = 0;  // in the membership the plan was drawn from
};

// A topology file is read whole at each resolution: bounded so a wrong path (a device, a huge
// log) cannot take the exporter's memory.
inline constexpr std::size_t kMaxTopologyFileBytes = 16u << 20;

// The plan of `node` from the topology file's text in `rotation`, appended to `peers` as static
// entries (names resolved like the static list's; group: the peer's leaf).
PlanStatus topology_peers(std::string_view text, const std::string& node, std::uint64_t rotation, std::uint64_t seed,
                          std::uint16_t port, std::vector<PeerSpec>& peers, std::vector<slurm::TopologyError>& errors);

// The plan of `node` from (node, leaf) pairs in any order (state active or node_not_found), appended
// to `peers` the same way.
PlanStatus membership_peers(std::vector<std::pair<std::string, std::string>> node_leaf, const std::string& node,
                            std::uint64_t rotation, std::uint64_t seed, std::uint16_t port, std::vector<PeerSpec>& peers);

}  // namespace rdma::collectors::prober
