#include "exporter/kube/kube_client.h"

#include <cerrno>
#include <cstdlib>

#include "sources/common/small_file.h"

namespace rdma::exporter::kube {

std::string read_token(const std::string& path, std::string& token) {
  auto file = read_small_file(path, kMaxTokenBytes);
  if (!file && file.sys_errno == EFBIG) return path + " is larger than " + std::to_string(kMaxTokenBytes) + " bytes";
  if (!file) return "cannot read " + path;
  std::string text = std::move(file.value);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) return path + " is empty";
  for (char c : text)
    if (c < 0x21 || c > 0x7e) return path + " holds characters a bearer token cannot have";
  token = std::move(text);
  return {};
}

std::string url_of(const std::string& api, std::string_view path_and_query) {
  std::string base = api;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base.append(path_and_query);
}

std::string query_value(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string api_from_env() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  if (!host || !*host) return {};
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // an IPv6 Service address
  return "https://" + h + ":" + (port && *port ? port : "443");
}

Answer get(const KubeApi& api, const Endpoint& endpoint, const Request& request) {
  using Fail = HttpsReply::Failure;
  Answer a;
  auto failed = [&](std::string reason, std::string cause, std::string message) {
    a.outcome = Answer::Outcome::kFailed;
    a.reason = std::move(reason);
    a.cause = std::move(cause);
    a.message = std::move(message);
    return a;
  };
  HttpsGet get;
  if (auto err = read_token(endpoint.token_file, get.bearer_token); !err.empty())
    return failed("kubernetes_token", endpoint.token_file, "Kubernetes API: " + err);
  get.url = request.url;
  get.accept = request.accept;
  get.ca_file = endpoint.ca_file;
  get.max_bytes = request.max_bytes;
  get.cancel = request.cancel;
  auto reply = api.get(get);
  const std::string where = "Kubernetes API " + endpoint.api + ": ";
  switch (reply.failure) {
    case Fail::kNone:
      break;
    case Fail::kCancelled:
      a.outcome = Answer::Outcome::kCancelled;
      return a;
    case Fail::kTls:
      return failed("kubernetes_tls", endpoint.api, where + reply.error + " (CA file " + endpoint.ca_file + ")");
    case Fail::kTooLarge:
      return failed("kubernetes_decode", "size", where + reply.error + " " + request.what);
    default:
      a.outcome = Answer::Outcome::kUnreachable;
      a.message = where + reply.error;
      return a;
  }
  const std::string status = std::to_string(reply.status);
  if (reply.status == 401 || reply.status == 403)
    return failed("kubernetes_auth", status,
                  where + "HTTP " + status + " " + request.what +
                      (reply.status == 401 ? " (the service account token is not accepted)"
                                           : " (the service account may not: ClusterRole " + request.permission + ")"));
  if (reply.status != 200) return failed("kubernetes_http", status, where + "HTTP " + status + " " + request.what);
  a.outcome = Answer::Outcome::kOk;
  a.body = std::move(reply.body);
  return a;
}

}  // namespace rdma::exporter::kube
