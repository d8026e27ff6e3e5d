// The Kubernetes API's PodList JSON -> pod names (sources/cgroup/pod_list.h, workload collector):
// any bytes decode or fail cleanly, and whatever is kept can become a label value as it is.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sources/cgroup/pod_list.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rdma::cgroup::PodList list;
  const auto error = rdma::cgroup::decode_pod_list(std::string_view(reinterpret_cast<const char*>(data), size), list);
  if (!error.empty() && !list.pods.empty()) std::abort();  // a failed document names nothing
  if (list.pods.size() > rdma::cgroup::kMaxPods) std::abort();
  for (const auto& p : list.pods) {
    if (p.uid.empty() || !rdma::cgroup::is_utf8(p.uid) || !rdma::cgroup::is_utf8(p.name) ||
        !rdma::cgroup::is_utf8(p.namespace_name) || p.containers.size() > rdma::cgroup::kMaxContainersPerPod)
      std::abort();
    if (!p.name.empty() && !rdma::cgroup::is_dns_subdomain(p.name)) std::abort();
    if (!p.namespace_name.empty() && !rdma::cgroup::is_dns_label(p.namespace_name)) std::abort();
    for (const auto& c : p.containers)
      if (c.id.empty() || (!c.name.empty() && !rdma::cgroup::is_dns_label(c.name))) std::abort();
  }
  return 0;
}
