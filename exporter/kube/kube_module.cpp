// librdma_exporter_kube.so: one HTTPS GET with libcurl, for the Kubernetes API client
// (kube_api.h). Loaded by kube_api() only when something reads the API.
#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "exporter/kube/kube_api.h"

namespace rdma::exporter::kube {
namespace {

struct Transfer {
  const HttpsGet& request;
  HttpsReply& reply;
  bool too_large = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * n;
  if (t->reply.body.size() + bytes > t->request.max_bytes) {
    t->too_large = true;
    return 0;  // libcurl stops with CURLE_WRITE_ERROR
  }
  t->reply.body.append(data, bytes);
  return bytes;
}

// Called about once a second even when nothing moves: the cancel flag stops a stuck request.
int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return t->request.cancel && t->request.cancel->load() ? 1 : 0;
}

HttpsReply::Failure failure_of(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
      return HttpsReply::Failure::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return HttpsReply::Failure::kTimeout;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return HttpsReply::Failure::kTls;
    case CURLE_ABORTED_BY_CALLBACK:
      return HttpsReply::Failure::kCancelled;
    default:
      return HttpsReply::Failure::kOther;
  }
}

HttpsReply get(const HttpsGet& request) {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  HttpsReply reply;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) {
    reply.failure = HttpsReply::Failure::kOther;
    reply.error = "curl_easy_init failed";
    return reply;
  }
  Transfer t{request, reply};
  const std::string auth = "Authorization: Bearer " + request.bearer_token;
  curl_slist* headers = curl_slist_append(nullptr, auth.c_str());
  // The Accept header is ours, never a caller's free text with a line break in it.
  const std::string accept = "Accept: " + (request.accept.find_first_of("\r\n") == std::string::npos
                                               ? request.accept : std::string("application/json"));
  headers = curl_slist_append(headers, accept.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers, &curl_slist_free_all);
  char message[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  // Only HTTPS, no redirects: the token goes to the API server and nowhere else; no proxy from the
  // environment either (an in-cluster client talks to the Service address directly).
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_CAINFO, request.ca_file.c_str());
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip: the bound applies to the decompressed body
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout_ms));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_ms));
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.max_bytes));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // a background thread: no SIGALRM for DNS timeouts
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, message);
  const CURLcode code = curl_easy_perform(c);
  if (code == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
  }
  reply.body.clear();
  if (t.too_large || code == CURLE_FILESIZE_EXCEEDED) {
    reply.failure = HttpsReply::Failure::kTooLarge;
    reply.error = "the response is larger than " + std::to_string(request.max_bytes) + " bytes";
  } else {
    reply.failure = failure_of(code);
    reply.error = message[0] ? message : curl_easy_strerror(code);
  }
  return reply;
}

constexpr KubeApi kApi{kKubeApiVersion, &get};

}  // namespace
}  // namespace rdma::exporter::kube

// The module's one export.
extern "C" __attribute__((visibility("default"))) const rdma::exporter::kube::KubeApi* rdma_exporter_kube_api() {
  return &rdma::exporter::kube::kApi;
}
