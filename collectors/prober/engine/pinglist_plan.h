// The topology pinglist, pure (no I/O, no clock): which peers one node probes on one rail in one
// rotation, from the fabric's leaf (ToR) membership. Every node computes the same plan from the
// same inputs, so no controller hands it out.
//
// The plan of rail r in rotation t:
//   - every node probes every other node of its own leaf (the leaf's mesh);
//   - every unordered pair of leaves {a, b} is probed by exactly one node, from the larger leaf
//     (equal sizes: a bit of hash(seed, r, {a, b}, t) picks the side), to one node of the other.
//     The prober is the node of its leaf that wins a rendezvous hash of (pair, node) among those
//     not yet at the leaf's cap ceil(pairs of the leaf / nodes of the leaf), the pairs taken in
//     the order of their hash; the target wins a rendezvous hash among the other leaf's nodes.
// So each rotation covers every leaf pair of the rail (both sides' leaf uplinks and a spine
// path between them), and a node of leaf a probes at most
//   (n_a - 1) + ceil((L - 1) / n_a)     (n_a: its leaf's nodes, L: the rail's leaves)
// peers (plan_fanout_bound). Rendezvous hashing keeps the plan stable: a node joining or leaving
// leaf b moves the pairs it wins or held (about 1/n_b of those touching b), and b's size change
// moves the side of b's pairs with leaves of b's old or new size (then those leaves' caps); pairs
// of two other leaves keep their prober and target unless a side change re-balanced their leaf
// (measured: 99.4 % of all pairs unchanged after a join at 4,096 nodes). Rotations re-draw probers
// and targets so that, over rotations, every node's uplink carries cross-leaf probes.
//
// What is held: the membership (PlanFabric: every node's name under its leaf, sorted, with a
// 64-bit hash each) of the rail, O(N) names; the plan itself is O(fan-out). The collector
// bounds N by its settings before building the fabric.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdma::collectors::prober {

// splitmix64's finalizer: every input bit moves every output bit, so xor-combined keys do not
// collide in structured ways (leaf names differing in one digit). The plan's seeded choices use
// it, and so does the fleet simulator's hashing (bench/prober/fleet_sim.cpp).
std::uint64_t splitmix64(std::uint64_t x);

struct PlanLeaf {
  std::string name;
  std::uint64_t hash = 0;             // of name
  std::vector<std::string> nodes;     // sorted, unique, never empty
  std::vector<std::uint64_t> hashes;  // of each node's name, same order
};

// One rail's fabric in canonical form: leaves sorted by name.
struct PlanFabric {
  std::vector<PlanLeaf> leaves;
  std::size_t nodes = 0;
  std::size_t conflicts = 0;  // nodes listed under two leaves: kept under the first by name
};

// Canonical form of (node, leaf) pairs in any order; duplicates are merged, empty names dropped.
PlanFabric make_plan_fabric(std::vector<std::pair<std::string, std::string>> node_leaf);

// Index of the leaf holding `node`, or leaves.size() when it holds none.
std::size_t find_plan_leaf(const PlanFabric& fabric, std::string_view node);

// One cross-leaf probe of a leaf's plan: indexes into fabric.leaves and their nodes.
struct PlanProbe {
  std::size_t prober = 0;  // index into the planned leaf's nodes
  std::size_t leaf = 0;    // target leaf
  std::size_t target = 0;  // index into the target leaf's nodes
};

// The cross-leaf probes of every node of leaf `leaf` (the pairs this leaf is prober for), in
// the order of target leaf. O(L * n_leaf + sum of the target leaves' sizes) hash mixes.
std::vector<PlanProbe> plan_leaf(const PlanFabric& fabric, std::size_t leaf, std::string_view rail,
                                 std::uint64_t rotation, std::uint64_t seed);

struct PlanPeer {
  std::string node;
  std::size_t leaf = 0;  // index into fabric.leaves
  bool remote = false;   // a cross-leaf probe (else a peer of the node's own leaf)
};

struct PinglistPlan {
  bool found = false;          // the node is in the fabric (else no peers: the caller's old list)
  std::size_t leaf = 0;        // the node's leaf
  std::vector<PlanPeer> peers; // own leaf first (by name), then remote ones by leaf
  std::size_t local = 0, remote = 0;
};

// The peers `node` probes on `rail` in rotation `rotation`.
PinglistPlan plan_pinglist(const PlanFabric& fabric, std::string_view rail, std::string_view node,
                           std::uint64_t rotation, std::uint64_t seed);

// The most peers a node of `leaf` is given: (n - 1) + ceil((L - 1) / n).
std::size_t plan_fanout_bound(const PlanFabric& fabric, std::size_t leaf);

// A stable 64-bit hash of a name (the one the plan uses; FNV-1a, then mixed).
std::uint64_t plan_hash(std::string_view s);

}  // namespace rdma::collectors::prober
