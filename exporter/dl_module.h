#pragma once
// The daemon's dlopen()ed modules (OpenSSL, the workload collector's gRPC clients): libraries
// mapped only when a feature needs them. Each exports one function returning a table whose first
// member is `int version`; the module is built from this repository with the same compiler, so
// the table may use C++ types, and its version is checked on load.
#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace rdma::exporter {

// Loads `file` (found through the executable's DT_RPATH: <build>/lib/rdma_exporter or
// <prefix>/<libdir>/rdma_exporter, exporter/tls/CMakeLists.txt) once per Api type, thread-safe, and
// returns its table. Never dlclose()d. Throws std::runtime_error naming `what` and dlerror().
template <class Api>
const Api& load_module(const char* file, const char* symbol, int version, const char* what) {
  static std::once_flag once;
  static const Api* api = nullptr;
  static std::string error;
  std::call_once(once, [&] {
    void* handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      error = std::string("cannot load ") + what + ": " + dlerror();
      return;
    }
    using Entry = const Api* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, symbol));
    const Api* found = entry ? entry() : nullptr;
    if (!found || found->version != version) {
      error = std::string(file) + " is not the module this build expects (version mismatch)";
      return;
    }
    api = found;
  });
  if (!api) throw std::runtime_error(error);
  return *api;
}

}  // namespace rdma::exporter
