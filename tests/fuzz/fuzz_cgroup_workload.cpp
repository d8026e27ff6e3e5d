// /proc/<pid>/cgroup text -> workload (sources/cgroup/workload_path.h, workload collector).
#include <cstdint>
#include <string_view>

#include "sources/cgroup/workload_path.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)rdma::cgroup::parse_proc_cgroup(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
