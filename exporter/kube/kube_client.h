#pragma once
// One GET of the Kubernetes API with the service account's token (kube_api.h does the HTTPS), and
// what it came to, classified the one way every caller counts it: the workload collector's pod
// list (collectors/workload/kube_names.h) and the prober's node list (its topology plan). The
// token file is read again before each request (bound tokens rotate), the CA file by libcurl at
// each connection.
#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "exporter/kube/kube_api.h"

namespace rdma::exporter::kube {

inline constexpr std::size_t kMaxTokenBytes = 64u << 10;
// Where the kubelet projects a pod's service account: the settings' defaults.
inline constexpr const char* kTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token";
inline constexpr const char* kCaFile = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

struct Endpoint {
  std::string api;  // "https://10.96.0.1:443"
  std::string token_file;
  std::string ca_file;
};

struct Answer {
  enum class Outcome {
    kOk,           // HTTP 200: body holds it
    kCancelled,    // the cancel flag was set
    kFailed,       // an answer that is an error (or no token to ask with): counted by reason
    kUnreachable,  // no HTTP answer at all: state (the API's reachability), not an error count
  };
  Outcome outcome = Outcome::kFailed;
  std::string reason;   // kFailed: kubernetes_token, kubernetes_tls, kubernetes_decode, kubernetes_auth, kubernetes_http
  std::string cause;    // kFailed: what the failure is logged once for (a file, an address, a status)
  std::string message;  // kFailed, kUnreachable: one log line, naming the API and the request
  std::string body;     // kOk
};

struct Request {
  std::string url;                           // from the endpoint's api (url_of)
  std::string accept = "application/json";   // a metadata-only list asks for its own type
  std::string what;                          // "listing the pods of node n1": for the messages
  std::string permission;                    // "get/list/watch pods": the RBAC a 403 lacks
  std::size_t max_bytes = 0;
  const std::atomic<bool>* cancel = nullptr;
};

// One GET: reads the token, asks, classifies the reply.
Answer get(const KubeApi& api, const Endpoint& endpoint, const Request& request);

// The API's URL with `path_and_query` appended (api's trailing slashes dropped).
std::string url_of(const std::string& api, std::string_view path_and_query);

// `s` percent-encoded for a query value (RFC 3986 unreserved characters kept).
std::string query_value(std::string_view s);

// The API server the pod runs against from the in-cluster environment the kubelet gives every
// container (https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT), or "" outside a pod.
std::string api_from_env();

// The bearer token in `path` as the header carries it into `token`, or what is wrong with it. A
// token is printable ASCII without spaces (a JWT); anything else (a CR/LF would add a header) is
// refused.
std::string read_token(const std::string& path, std::string& token);

}  // namespace rdma::exporter::kube
