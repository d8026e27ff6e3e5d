// The topology pinglist from a Slurm topology.conf file on disk (fixtures/): errors reported by
// line, the rest of the file read, and the plan built from what was read.
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "collectors/prober/engine/pinglist_plan.h"
#include "collectors/prober/engine/topology_plan.h"
#include "sources/slurm/topology_conf.h"

using namespace rdma;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("slurm topology file: errors by line, the good lines read, the plan built") {
  const auto t = slurm::parse_topology_conf(read(RDMA_SOURCE_DIR "/tests/prober/fixtures/topology_errors.conf"));
  std::vector<std::size_t> lines;
  for (const auto& e : t.errors) lines.push_back(e.line);
  CHECK(lines == std::vector<std::size_t>{7, 8, 9, 10, 11, 12, 13, 16});
  auto message = [&](std::size_t line) {
    for (const auto& e : t.errors)
      if (e.line == line) return e.message;
    return std::string();
  };
  CHECK(message(7) == "Switches: 'leaf9' is not defined");
  CHECK(message(8) == "switch 'leaf2' defined again (first on line 3)");
  CHECK(message(9) == "Nodes: range '020-010' runs backwards");
  CHECK(message(10) == "Nodes: unclosed '[' in 'gpu[1-2'");
  CHECK(message(11) == "no SwitchName=");
  CHECK(message(12) == "node 'gpu004' already under a switch on line 2");
  CHECK(message(13).find("names more than") != std::string::npos);
  CHECK(message(16) == "unknown key 'Bogus'");
  // leaf1..4 (lower-case keys on line 4 too), spine1, spine2, leaf7 (its only node a duplicate).
  REQUIRE(t.nodes.size() == 12);
  CHECK(t.nodes.front().node == "gpu001");
  CHECK(t.nodes.front().leaf == "leaf1");
  CHECK(t.nodes.front().spine == "spine1");
  std::set<std::string> leaves;
  std::vector<std::pair<std::string, std::string>> input;
  for (const auto& n : t.nodes) {
    leaves.insert(n.leaf);
    input.emplace_back(n.node, n.leaf);
    if (n.node == "cpu01") CHECK(n.spine == "spine2");
  }
  CHECK(leaves == std::set<std::string>{"leaf1", "leaf2", "leaf3", "leaf4"});

  const auto f = collectors::prober::make_plan_fabric(input);
  REQUIRE(f.leaves.size() == 4);
  std::set<std::pair<std::size_t, std::size_t>> covered;
  for (std::size_t a = 0; a < 4; ++a)
    for (const auto& p : collectors::prober::plan_leaf(f, a, "rail0", 0, 1)) covered.emplace(std::min(a, p.leaf), std::max(a, p.leaf));
  CHECK(covered.size() == 6);
  const auto plan = collectors::prober::plan_pinglist(f, "rail0", "gpu011", 0, 1);  // the one-node leaf
  REQUIRE(plan.found);
  CHECK(plan.local == 0);
}

TEST_CASE("slurm topology file: this node's plan peers as peer entries, or a clear state without it") {
  const std::string text = read(RDMA_SOURCE_DIR "/tests/prober/fixtures/topology_errors.conf");
  std::vector<collectors::prober::PeerSpec> peers;
  std::vector<slurm::TopologyError> errors;
  // gpu002 of leaf1 (4 nodes; leaves of 4, 4, 3, 1): its 3 leaf peers, and its share of leaf1's
  // pairs (leaf1 probes leaf3 and leaf4 surely, leaf2 on a tie: 0 to 3 remote peers).
  auto st = collectors::prober::topology_peers(text, "gpu002", 7, 0, 9662, peers, errors);
  CHECK(st.state == "active");
  CHECK(st.leaves == 4);
  CHECK(st.leaf_pairs == 6);
  CHECK(st.local == 3);
  CHECK(st.file_errors == 8);
  CHECK(errors.size() == 8);
  CHECK(st.rotation == 7);
  REQUIRE(peers.size() == st.local + st.remote);
  CHECK(peers[0].name == "gpu001");
  CHECK(peers[0].address == "gpu001");
  CHECK(peers[0].tcp_port == 9662);
  CHECK(peers[0].group == "leaf1");
  CHECK(peers[0].source == "topology");
  // Over the nodes of leaf1, its remote pairs are split with at most one more on any node.
  std::uint64_t remote = 0, most = 0;
  for (const char* n : {"gpu001", "gpu002", "gpu003", "gpu004"}) {
    std::vector<collectors::prober::PeerSpec> p;
    const auto s = collectors::prober::topology_peers(text, n, 7, 0, 9662, p, errors);
    remote += s.remote;
    most = std::max(most, s.remote);
  }
  CHECK(remote >= 2);
  CHECK(most == 1);
  // A node the file does not place, and a file with nothing but errors: no peers, the state says why.
  peers.clear();
  CHECK(collectors::prober::topology_peers(text, "other", 7, 0, 9662, peers, errors).state == "node_not_found");
  CHECK(peers.empty());
  const auto bad = collectors::prober::topology_peers("SwitchName=s Nodes=n[\n", "n1", 7, 0, 9662, peers, errors);
  CHECK(bad.state == "file_error");
  CHECK(bad.file_errors == 1);
  CHECK(peers.empty());
}
