#pragma once
// The daemon's HTTPS client for the Kubernetes API (libcurl, OpenSSL flavour) behind a dlopen()ed
// module, librdma_exporter_kube.so beside the other modules: libcurl and the libraries it pulls in
// (OpenSSL, nghttp2, ...) are mapped only when something reads the API (the workload collector's
// pod names, the prober's node labels). Built from this repository with the same compiler, so the
// table uses C++ types; its version is checked on load. kube_client.h is what collectors call.
#include <atomic>
#include <cstddef>
#include <string>

namespace rdma::exporter::kube {

inline constexpr int kKubeApiVersion = 2;  // 2: HttpsGet::accept

struct HttpsGet {
  std::string url;           // https:// only (any other scheme, and redirects, are refused)
  std::string ca_file;       // the server's certificate must chain to it and name the host
  std::string bearer_token;  // sent as "Authorization: Bearer <token>"; never logged
  std::string accept = "application/json";  // the Accept header (a metadata-only list asks for its own type)
  int connect_timeout_ms = 5000;
  int timeout_ms = 10000;  // the whole request, connect included
  std::size_t max_bytes = 0;  // the body (decompressed) is cut off beyond it: `too_large`
  const std::atomic<bool>* cancel = nullptr;  // set: the request stops within about a second
};

struct HttpsReply {
  enum class Failure { kNone, kConnect, kTls, kTimeout, kTooLarge, kCancelled, kOther };
  Failure failure = Failure::kNone;  // kNone: an HTTP status came, `status` and `body` hold it
  std::string error;                 // what failed (libcurl's message), when failure != kNone
  long status = 0;
  std::string body;
};

struct KubeApi {
  int version;
  HttpsReply (*get)(const HttpsGet& request);
};

// Loads the module on first call (thread-safe). Throws std::runtime_error naming the module and
// dlerror() when it cannot be loaded.
const KubeApi& kube_api();

}  // namespace rdma::exporter::kube
