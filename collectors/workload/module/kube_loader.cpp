#include "collectors/workload/module/kube_api.h"
#include "exporter/dl_module.h"

namespace rdma::workload {

const KubeApi& kube_api() {
  return exporter::load_module<KubeApi>("librdma_exporter_kube.so", "rdma_exporter_kube_api", kKubeApiVersion,
                                        "the workload collector's Kubernetes API module");
}

}  // namespace rdma::workload
