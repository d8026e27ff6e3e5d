// Slurm's topology.conf -> leaves and nodes (sources/slurm/topology_conf.h, the prober's topology
// pinglist): any bytes parse or fail cleanly, within the bounds, every error with a line.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sources/slurm/topology_conf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto t = rdma::slurm::parse_topology_conf(text);
  if (t.switches.size() > rdma::slurm::kMaxSwitches || t.nodes.size() > rdma::slurm::kMaxNodes) std::abort();
  std::size_t lines = 1;
  for (char c : text) lines += c == '\n';
  for (const auto& e : t.errors)
    if (e.line == 0 || e.line > lines || e.message.empty()) std::abort();
  for (const auto& n : t.nodes)
    if (n.node.empty() || n.leaf.empty()) std::abort();
  return 0;
}
