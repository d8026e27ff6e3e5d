#pragma once
// The topology plan's membership from Kubernetes node labels: every node that carries the leaf
// label (NVIDIA Topograph's network.topology.nvidia.com/leaf, the key a setting), listed through
// the API client (exporter/kube/kube_client.h) as metadata only, 500 per page by `continue`, and
// decoded by sources/cgroup/node_list.h. Called by the prober's resolver thread, at most once per
// `topology-refresh`; a failed listing keeps the last good membership.
//
// Cost: a node lists the whole labelled fleet (the plan needs every node's leaf), so the API
// server answers N lists of N nodes' metadata per refresh: at 16,384 nodes and 10 minutes, 27
// lists a second of about 1 KiB per node. Large fleets mount the same membership as a file
// (topology-file, from a ConfigMap) instead: the kubelet then distributes it (docs/prober.md).
#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "exporter/kube/kube_client.h"

namespace rdma::collectors::prober {

inline constexpr std::size_t kNodePageLimit = 500;      // items asked per page
inline constexpr std::size_t kMaxLabelledNodes = 200000;  // as the topology file's bound (sources/slurm)

struct NodeLeaves {
  exporter::kube::Answer::Outcome outcome = exporter::kube::Answer::Outcome::kFailed;
  std::string reason, cause, message;  // as kube::Answer's when not kOk
  std::vector<std::pair<std::string, std::string>> node_leaf;  // kOk: (node, leaf) of every labelled node
  std::size_t pages = 0;
  std::size_t unlabelled = 0;  // listed, but the label's value is empty or not a valid value
  std::size_t dropped = 0;     // items without a valid name, and label values not valid
};

// The URL of one page of the labelled nodes: labelSelector=<key> (nodes that carry it), limit,
// and the previous page's continue token.
std::string node_page_url(const std::string& api, const std::string& leaf_label, const std::string& continue_token);

// Every page of the node list, or the first failure.
NodeLeaves list_node_leaves(const exporter::kube::KubeApi& api, const exporter::kube::Endpoint& endpoint,
                            const std::string& leaf_label, const std::atomic<bool>* cancel);

}  // namespace rdma::collectors::prober
