#include <dlfcn.h>

#include <mutex>
#include <stdexcept>

#include "exporter/tls/openssl_api.h"

namespace rdma::tls {

const OpenSslApi& openssl() {
  static std::once_flag once;
  static const OpenSslApi* api = nullptr;
  static std::string error;
  std::call_once(once, [] {
    // Found through the executable's DT_RPATH (<build>/lib/rdma_exporter or
    // <prefix>/lib/rdma_exporter); see CMakeLists.txt here.
    void* handle = dlopen("librdma_exporter_openssl.so", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      error = std::string("cannot load the OpenSSL module: ") + dlerror();
      return;
    }
    using Entry = const OpenSslApi* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, "rdma_exporter_openssl_api"));
    const OpenSslApi* found = entry ? entry() : nullptr;
    if (!found || found->version != kOpenSslApiVersion) {
      error = "librdma_exporter_openssl.so is not the module this build expects (version mismatch)";
      return;
    }
    api = found;  // never dlclose()d: the process keeps OpenSSL once it has loaded it
  });
  if (!api) throw std::runtime_error(error);
  return *api;
}

}  // namespace rdma::tls
