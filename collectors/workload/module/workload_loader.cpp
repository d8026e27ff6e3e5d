#include "collectors/workload/module/workload_api.h"
#include "exporter/dl_module.h"

namespace rdma::workload {

const WorkloadApi& workload_api() {
  // gRPC keeps threads once started: the module stays.
  return exporter::load_module<WorkloadApi>("librdma_exporter_workload.so", "rdma_exporter_workload_api",
                                            kWorkloadApiVersion, "the workload gRPC module");
}

}  // namespace rdma::workload
