#include "exporter/dl_module.h"
#include "exporter/tls/openssl_api.h"

namespace rdma::tls {

const OpenSslApi& openssl() {
  // The process keeps OpenSSL once it has loaded it.
  return exporter::load_module<OpenSslApi>("librdma_exporter_openssl.so", "rdma_exporter_openssl_api",
                                           kOpenSslApiVersion, "the OpenSSL module");
}

}  // namespace rdma::tls
