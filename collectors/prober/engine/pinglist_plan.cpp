#include "collectors/prober/engine/pinglist_plan.h"

#include <algorithm>

namespace rdma::collectors::prober {

std::uint64_t splitmix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

namespace {
std::uint64_t mix(std::uint64_t x) { return splitmix64(x); }
std::uint64_t mix2(std::uint64_t a, std::uint64_t b) { return mix(a ^ mix(b + 0x9e3779b97f4a7c15ull)); }
}  // namespace

std::uint64_t plan_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return mix(h);
}

PlanFabric make_plan_fabric(std::vector<std::pair<std::string, std::string>> node_leaf) {
  PlanFabric f;
  std::erase_if(node_leaf, [](const auto& p) { return p.first.empty() || p.second.empty(); });
  // By node then leaf: a node's first leaf by name wins, the rest are conflicts.
  std::sort(node_leaf.begin(), node_leaf.end());
  node_leaf.erase(std::unique(node_leaf.begin(), node_leaf.end()), node_leaf.end());
  std::vector<std::pair<std::string, std::string>> kept;  // (leaf, node)
  kept.reserve(node_leaf.size());
  for (std::size_t i = 0; i < node_leaf.size(); ++i) {
    if (!kept.empty() && node_leaf[i].first == kept.back().second) {
      ++f.conflicts;
      continue;
    }
    kept.emplace_back(std::move(node_leaf[i].second), std::move(node_leaf[i].first));
  }
  std::sort(kept.begin(), kept.end());
  for (auto& [leaf, node] : kept) {
    if (f.leaves.empty() || f.leaves.back().name != leaf) f.leaves.push_back({leaf, plan_hash(leaf), {}, {}});
    f.leaves.back().hashes.push_back(plan_hash(node));
    f.leaves.back().nodes.push_back(std::move(node));
  }
  f.nodes = kept.size();
  return f;
}

std::size_t find_plan_leaf(const PlanFabric& fabric, std::string_view node) {
  for (std::size_t i = 0; i < fabric.leaves.size(); ++i) {
    const auto& n = fabric.leaves[i].nodes;
    if (std::binary_search(n.begin(), n.end(), node, std::less<>{})) return i;
  }
  return fabric.leaves.size();
}

std::vector<PlanProbe> plan_leaf(const PlanFabric& fabric, std::size_t leaf, std::string_view rail,
                                 std::uint64_t rotation, std::uint64_t seed) {
  std::vector<PlanProbe> out;
  if (leaf >= fabric.leaves.size()) return out;
  const PlanLeaf& a = fabric.leaves[leaf];
  const std::uint64_t base = mix2(mix2(seed, plan_hash(rail)), rotation);
  // The pairs this leaf probes, with their symmetric key (the same from either side).
  struct Pair {
    std::uint64_t key;
    std::size_t leaf;
  };
  std::vector<Pair> pairs;
  for (std::size_t j = 0; j < fabric.leaves.size(); ++j) {
    if (j == leaf) continue;
    const PlanLeaf& b = fabric.leaves[j];
    const std::uint64_t lo = std::min(a.hash, b.hash), hi = std::max(a.hash, b.hash);
    const std::uint64_t key = mix2(mix2(base, lo), hi);
    bool ours;
    if (a.nodes.size() != b.nodes.size()) {
      ours = a.nodes.size() > b.nodes.size();
    } else {
      // The lower leaf by name probes on an even key: both sides read the same bit.
      ours = ((key & 1) == 0) == (leaf < j);
    }
    if (ours) pairs.push_back({key, j});
  }
  // Pairs in hash order, each to the rendezvous winner among the nodes under the cap: the load
  // of a leaf's nodes differs by at most one, and a joining node takes over only what it wins.
  std::sort(pairs.begin(), pairs.end(), [](const Pair& x, const Pair& y) { return x.key < y.key || (x.key == y.key && x.leaf < y.leaf); });
  const std::size_t n = a.nodes.size();
  const std::size_t cap = (pairs.size() + n - 1) / n;
  std::vector<std::size_t> load(n, 0);
  out.reserve(pairs.size());
  for (const Pair& p : pairs) {
    std::size_t best = n;
    std::uint64_t best_score = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (load[i] >= cap) continue;
      const std::uint64_t s = mix2(p.key, a.hashes[i]);
      if (best == n || s > best_score) best = i, best_score = s;
    }
    ++load[best];
    const PlanLeaf& b = fabric.leaves[p.leaf];
    std::size_t target = 0;
    std::uint64_t target_score = 0;
    const std::uint64_t tkey = mix2(p.key, 0x7461726765747321ull);
    for (std::size_t i = 0; i < b.nodes.size(); ++i) {
      const std::uint64_t s = mix2(tkey, b.hashes[i]);
      if (i == 0 || s > target_score) target = i, target_score = s;
    }
    out.push_back({best, p.leaf, target});
  }
  std::sort(out.begin(), out.end(), [](const PlanProbe& x, const PlanProbe& y) { return x.leaf < y.leaf; });
  return out;
}

PinglistPlan plan_pinglist(const PlanFabric& fabric, std::string_view rail, std::string_view node,
                           std::uint64_t rotation, std::uint64_t seed) {
  PinglistPlan plan;
  plan.leaf = find_plan_leaf(fabric, node);
  if (plan.leaf >= fabric.leaves.size()) return plan;
  plan.found = true;
  const PlanLeaf& a = fabric.leaves[plan.leaf];
  const std::size_t self = static_cast<std::size_t>(
      std::lower_bound(a.nodes.begin(), a.nodes.end(), node, std::less<>{}) - a.nodes.begin());
  for (std::size_t i = 0; i < a.nodes.size(); ++i)
    if (i != self) plan.peers.push_back({a.nodes[i], plan.leaf, false});
  plan.local = plan.peers.size();
  for (const PlanProbe& p : plan_leaf(fabric, plan.leaf, rail, rotation, seed))
    if (p.prober == self) plan.peers.push_back({fabric.leaves[p.leaf].nodes[p.target], p.leaf, true});
  plan.remote = plan.peers.size() - plan.local;
  return plan;
}

std::size_t plan_fanout_bound(const PlanFabric& fabric, std::size_t leaf) {
  if (leaf >= fabric.leaves.size()) return 0;
  const std::size_t n = fabric.leaves[leaf].nodes.size(), l = fabric.leaves.size();
  return (n - 1) + (l - 1 + n - 1) / n;
}

}  // namespace rdma::collectors::prober
