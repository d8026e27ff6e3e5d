#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "collectors/prober/engine/pinglist_plan.h"

using namespace rdma::collectors::prober;

namespace {
std::string node_name(std::size_t i) {
  char b[16];
  std::snprintf(b, sizeof b, "node%06zu", i);
  return b;
}
std::string leaf_name(std::size_t i) {
  char b[16];
  std::snprintf(b, sizeof b, "leaf%05zu", i);
  return b;
}
// N nodes on uneven leaves: sizes drawn from [mean/2, 3*mean/2], the first leaf of one node.
std::vector<std::pair<std::string, std::string>> synthetic(std::size_t n, std::size_t mean, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> size(mean / 2, mean + mean / 2);
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t leaf = 0, i = 0;
  while (i < n) {
    const std::size_t s = std::min(n - i, leaf == 0 ? std::size_t{1} : size(rng));
    for (std::size_t k = 0; k < s; ++k, ++i) out.emplace_back(node_name(i), leaf_name(leaf));
    ++leaf;
  }
  return out;
}

struct Figures {
  std::size_t leaves = 0, pairs = 0, covered = 0, max_fanout = 0, max_over_bound = 0;
  double mean_fanout = 0;
  std::size_t median_leaf = 0;
};

// Every leaf's plan: coverage of the unordered leaf pairs and every node's fan-out.
Figures check_rotation(const PlanFabric& f, std::string_view rail, std::uint64_t rotation, std::uint64_t seed) {
  Figures fig;
  const std::size_t l = f.leaves.size();
  fig.leaves = l;
  fig.pairs = l * (l - 1) / 2;
  std::vector<std::uint8_t> seen(l * l, 0);
  std::size_t total = 0;
  std::vector<std::size_t> sizes;
  for (std::size_t a = 0; a < l; ++a) {
    const std::size_t n = f.leaves[a].nodes.size();
    sizes.push_back(n);
    std::vector<std::size_t> remote(n, 0);
    for (const PlanProbe& p : plan_leaf(f, a, rail, rotation, seed)) {
      REQUIRE(p.leaf != a);
      REQUIRE(p.prober < n);
      REQUIRE(p.target < f.leaves[p.leaf].nodes.size());
      const std::size_t lo = std::min(a, p.leaf), hi = std::max(a, p.leaf);
      REQUIRE(seen[lo * l + hi] == 0);  // exactly one prober per pair
      seen[lo * l + hi] = 1;
      ++remote[p.prober];
    }
    for (std::size_t r : remote) {
      const std::size_t fan = n - 1 + r;
      fig.max_fanout = std::max(fig.max_fanout, fan);
      REQUIRE(fan <= plan_fanout_bound(f, a));
      total += fan;
    }
  }
  for (std::size_t a = 0; a < l; ++a)
    for (std::size_t b = a + 1; b < l; ++b) fig.covered += seen[a * l + b];
  fig.mean_fanout = static_cast<double>(total) / static_cast<double>(f.nodes);
  std::nth_element(sizes.begin(), sizes.begin() + sizes.size() / 2, sizes.end());
  fig.median_leaf = sizes[sizes.size() / 2];
  return fig;
}

// (prober, target) names of every covered leaf pair, keyed by the pair's leaf names.
std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> assignment(const PlanFabric& f, std::uint64_t rotation) {
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> out;
  for (std::size_t a = 0; a < f.leaves.size(); ++a)
    for (const PlanProbe& p : plan_leaf(f, a, "rail0", rotation, 7)) {
      auto key = std::minmax(f.leaves[a].name, f.leaves[p.leaf].name);
      out[{key.first, key.second}] = {f.leaves[a].nodes[p.prober], f.leaves[p.leaf].nodes[p.target]};
    }
  return out;
}
double unchanged_share(const PlanFabric& before, const PlanFabric& after) {
  const auto x = assignment(before, 3), y = assignment(after, 3);
  std::size_t same = 0;
  for (const auto& [k, v] : x) {
    auto it = y.find(k);
    same += it != y.end() && it->second == v;
  }
  return static_cast<double>(same) / static_cast<double>(x.size());
}
}  // namespace

TEST_CASE("pinglist plan: every leaf pair of every rail covered each rotation, fan-out within the bound") {
  // (nodes, mean nodes per leaf, rails, rotations): 100,000 nodes on one rail (the cost is L * N).
  const std::vector<std::tuple<std::size_t, std::size_t, int, int>> cases = {
      {1024, 16, 8, 3}, {4096, 32, 2, 2}, {16384, 32, 1, 2}, {100000, 64, 1, 1}};
  for (const auto& [n, mean, rails, rotations] : cases) {
    const PlanFabric f = make_plan_fabric(synthetic(n, mean, static_cast<unsigned>(n)));
    REQUIRE(f.nodes == n);
    REQUIRE(f.leaves.front().nodes.size() == 1);
    for (int r = 0; r < rails; ++r)
      for (int t = 0; t < rotations; ++t) {
        const Figures fig = check_rotation(f, "rail" + std::to_string(r), static_cast<std::uint64_t>(t), 42);
        CHECK(fig.covered == fig.pairs);
        const double issue_bound = std::ceil(static_cast<double>(fig.leaves) / static_cast<double>(fig.median_leaf)) +
                                   static_cast<double>(fig.median_leaf);
        if (r == 0 && t == 0)
          std::printf("plan nodes=%zu leaves=%zu median_leaf=%zu pairs=%zu covered=%zu fanout_mean=%.1f fanout_max=%zu "
                      "ceil(L/k)+k=%.0f\n",
                      n, fig.leaves, fig.median_leaf, fig.pairs, fig.covered, fig.mean_fanout, fig.max_fanout, issue_bound);
        // Mean fan-out about ceil(L/k) + k with k the typical leaf (the largest leaves, which
        // probe their pairs with smaller leaves, are the max).
        CHECK(fig.mean_fanout <= issue_bound);
      }
  }
}

TEST_CASE("pinglist plan: identical on every node from the same inputs, in any input order") {
  auto input = synthetic(2048, 24, 5);
  const PlanFabric f = make_plan_fabric(input);
  std::shuffle(input.begin(), input.end(), std::mt19937(9));
  input.push_back(input.front());  // a duplicate is merged
  const PlanFabric g = make_plan_fabric(input);
  REQUIRE(g.nodes == f.nodes);
  REQUIRE(g.conflicts == 0);
  // What each node computes for itself equals the leaf's plan seen from any other node.
  std::size_t remote_total = 0;
  for (std::size_t a = 0; a < f.leaves.size(); a += 7) {
    const auto probes = plan_leaf(f, a, "mlx5_3", 11, 99);
    for (std::size_t i = 0; i < f.leaves[a].nodes.size(); ++i) {
      const auto mine = plan_pinglist(f, "mlx5_3", f.leaves[a].nodes[i], 11, 99);
      const auto again = plan_pinglist(g, "mlx5_3", f.leaves[a].nodes[i], 11, 99);
      REQUIRE(mine.found);
      REQUIRE(mine.leaf == a);
      REQUIRE(mine.local == f.leaves[a].nodes.size() - 1);
      std::vector<std::string> expected;
      for (const auto& p : probes)
        if (p.prober == i) expected.push_back(f.leaves[p.leaf].nodes[p.target]);
      std::vector<std::string> got;
      for (const auto& p : mine.peers)
        if (p.remote) got.push_back(p.node);
      CHECK(got == expected);
      REQUIRE(again.peers.size() == mine.peers.size());
      for (std::size_t k = 0; k < mine.peers.size(); ++k) CHECK(again.peers[k].node == mine.peers[k].node);
      remote_total += mine.remote;
    }
  }
  CHECK(remote_total > 0);
  // Another rotation, rail or seed re-draws the probers or targets.
  const auto r0 = plan_leaf(f, 3, "mlx5_3", 11, 99), r1 = plan_leaf(f, 3, "mlx5_3", 12, 99);
  const auto s1 = plan_leaf(f, 3, "mlx5_3", 11, 100), rail = plan_leaf(f, 3, "mlx5_4", 11, 99);
  auto same = [](const auto& x, const auto& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].prober != y[i].prober || x[i].leaf != y[i].leaf || x[i].target != y[i].target) return false;
    return true;
  };
  CHECK_FALSE(same(r0, r1));
  CHECK_FALSE(same(r0, s1));
  CHECK_FALSE(same(r0, rail));
}

TEST_CASE("pinglist plan: stable under a node joining or leaving") {
  const auto input = synthetic(4096, 32, 3);
  const PlanFabric before = make_plan_fabric(input);
  // Join: a new node under a mid-sized leaf; leave: one node of another leaf.
  auto joined = input;
  joined.emplace_back("node999999", before.leaves[10].name);
  auto left = input;
  left.erase(std::find_if(left.begin(), left.end(), [&](const auto& p) { return p.second == before.leaves[20].name; }));
  const double join_share = unchanged_share(before, make_plan_fabric(joined));
  const double leave_share = unchanged_share(before, make_plan_fabric(left));
  std::printf("plan stability nodes=4096 leaves=%zu unchanged_after_join=%.4f unchanged_after_leave=%.4f\n",
              before.leaves.size(), join_share, leave_share);
  // Only pairs of the changed leaf can move: at most about 2/L of them.
  CHECK(join_share >= 0.95);
  CHECK(leave_share >= 0.95);
  // Coverage still holds after the change.
  const PlanFabric after = make_plan_fabric(joined);
  const Figures fig = check_rotation(after, "rail0", 3, 7);
  CHECK(fig.covered == fig.pairs);
}

TEST_CASE("pinglist plan: small fabrics, a one-node leaf, an unknown node, conflicting leaves") {
  // leaf A: 3 nodes, B: 1 node, C: 2 nodes; a4 also listed under C (a conflict: kept under A).
  const PlanFabric f = make_plan_fabric({{"a1", "A"}, {"a2", "A"}, {"a3", "A"}, {"a4", "A"}, {"a4", "C"},
                                         {"b1", "B"}, {"c1", "C"}, {"c2", "C"}, {"", "C"}, {"x", ""}});
  REQUIRE(f.leaves.size() == 3);
  CHECK(f.nodes == 7);
  CHECK(f.conflicts == 1);
  CHECK(f.leaves[0].nodes.size() == 4);
  // The larger leaf probes: A probes B and C, C probes B; B (one node) probes nobody remote.
  const auto b = plan_pinglist(f, "r", "b1", 0, 1);
  REQUIRE(b.found);
  CHECK(b.local == 0);
  CHECK(b.remote == 0);
  std::size_t from_a = 0;
  for (const auto& n : f.leaves[0].nodes) from_a += plan_pinglist(f, "r", n, 0, 1).remote;
  CHECK(from_a == 2);
  const auto c = plan_leaf(f, 2, "r", 0, 1);
  REQUIRE(c.size() == 1);
  CHECK(c[0].leaf == 1);
  CHECK(plan_fanout_bound(f, 1) == 2);  // 0 + ceil(2 / 1)
  const auto unknown = plan_pinglist(f, "r", "zz", 0, 1);
  CHECK_FALSE(unknown.found);
  CHECK(unknown.peers.empty());
  // One leaf: its mesh only.
  const PlanFabric one = make_plan_fabric({{"n1", "L"}, {"n2", "L"}});
  const auto p = plan_pinglist(one, "r", "n1", 5, 5);
  REQUIRE(p.peers.size() == 1);
  CHECK(p.peers[0].node == "n2");
  CHECK(plan_leaf(make_plan_fabric({}), 0, "r", 0, 0).empty());
}
