// The Kubernetes API's NodeList JSON -> node names and labels (sources/cgroup/node_list.h, the
// prober's topology plan): any bytes decode or fail cleanly, and what is kept is valid.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "sources/cgroup/node_list.h"
#include "sources/cgroup/pod_list.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<std::string> keys = {"network.topology.nvidia.com/leaf", "network.topology.nvidia.com/spine"};
  rdma::cgroup::NodeList list;
  const auto error = rdma::cgroup::decode_node_list(std::string_view(reinterpret_cast<const char*>(data), size), keys, list);
  if (!error.empty() && !list.nodes.empty()) std::abort();  // a failed document names nothing
  if (list.nodes.size() > rdma::cgroup::kMaxNodeListItems) std::abort();
  for (const auto& n : list.nodes) {
    if (!rdma::cgroup::is_dns_subdomain(n.name) || n.values.size() != keys.size()) std::abort();
    for (const auto& v : n.values)
      if (!rdma::cgroup::is_label_value(v)) std::abort();
  }
  return 0;
}
