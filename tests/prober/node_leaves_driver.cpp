// Test driver of the topology plan's node list (collectors/prober/node_leaves.h): the real
// Kubernetes API client (exporter/kube, its libcurl module) lists the labelled nodes, and this
// node's plan is drawn from them as the prober's resolver does. Prints one JSON object.
//   node_leaves_driver API TOKEN_FILE CA_FILE LEAF_LABEL NODE
#include <cstdio>
#include <nlohmann/json.hpp>

#include "collectors/prober/engine/topology_plan.h"
#include "collectors/prober/node_leaves.h"

using namespace rdma;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s API TOKEN_FILE CA_FILE LEAF_LABEL NODE\n", argv[0]);
    return 2;
  }
  using Outcome = exporter::kube::Answer::Outcome;
  const exporter::kube::Endpoint endpoint{argv[1], argv[2], argv[3]};
  std::atomic<bool> cancel{false};
  auto listed = collectors::prober::list_node_leaves(exporter::kube::kube_api(), endpoint, argv[4], &cancel);
  nlohmann::json out;
  out["outcome"] = listed.outcome == Outcome::kOk            ? "ok"
                   : listed.outcome == Outcome::kFailed      ? "failed"
                   : listed.outcome == Outcome::kUnreachable ? "unreachable"
                                                             : "cancelled";
  out["reason"] = listed.reason;
  out["cause"] = listed.cause;
  out["message"] = listed.message;
  out["pages"] = listed.pages;
  out["unlabelled"] = listed.unlabelled;
  out["dropped"] = listed.dropped;
  out["members"] = listed.node_leaf;
  std::vector<collectors::prober::PeerSpec> peers;
  const auto st = collectors::prober::membership_peers(listed.node_leaf, argv[5], 7, 0, 9662, peers);
  out["plan"] = {{"state", st.state}, {"leaves", st.leaves}, {"nodes", st.nodes}, {"local", st.local}, {"remote", st.remote}};
  for (const auto& p : peers) out["plan"]["peers"].push_back({p.name, p.group});
  std::puts(out.dump().c_str());
  return 0;
}
