#include "exporter/kube/kube_api.h"
#include "exporter/dl_module.h"

namespace rdma::exporter::kube {

const KubeApi& kube_api() {
  return exporter::load_module<KubeApi>("librdma_exporter_kube.so", "rdma_exporter_kube_api", kKubeApiVersion,
                                        "the Kubernetes API module");
}

}  // namespace rdma::exporter::kube
