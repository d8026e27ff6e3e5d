// An extra HTTP path served for a collector (e.g. the prober's /probe): the core routes GET/HEAD
// requests for the path to the handler, after the same basic auth, TLS and request limits as the
// telemetry path and a concurrency admission of its own (--web.max-concurrent-other-requests,
// shared by every collector's path, never the scrapes' slots), and knows nothing else about it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace rdma::exporter {

struct HttpResponse {
  int status = 200;
  // A 200 in the text format (kTextContentType, exporter/exposition.h) is gzipped, as /metrics
  // is, when the client accepts it.
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // > 0: sent as a Retry-After header (seconds), e.g. with a 429 from a path's own rate bound.
  int retry_after_s = 0;
};

// Called on an HTTP worker thread, possibly concurrently with itself and with collect(), with
// the raw (still percent-encoded) query string. May block (a probe runs for seconds); must not
// throw (an exception becomes a 500).
using HttpPathHandler = std::function<HttpResponse(std::string_view query)>;

// Inside an HttpPathHandler: the request's X-Prometheus-Scrape-Timeout-Seconds less
// --web.timeout-offset, parsed as for the telemetry path (scrape_timeout_from_header);
// nullopt without a usable header or outside a handler. A handler that reads a target on demand
// (the pma collector's /pma) bounds its work with it, as /metrics does.
std::optional<std::chrono::milliseconds> request_scrape_timeout();

// Inside an HttpPathHandler: how the server authenticated the request, so that a handler whose
// path is riskier than a scrape (the prober's /probe sends traffic) can refuse anonymous callers.
// A basic-auth user is set only after the web config's check passed; a client certificate counts
// only when the TLS layer verified it against client_ca_file (VerifyClientCertIfGiven,
// RequireAndVerifyClientCert), never one merely requested. Empty outside a handler.
struct RequestIdentity {
  std::string basic_auth_user;     // empty: no basic auth configured (or outside a handler)
  bool client_cert_verified = false;
  bool authenticated() const { return !basic_auth_user.empty() || client_cert_verified; }
};
const RequestIdentity& request_identity();

// The one access rule of the paths riskier than a scrape (/probe sends traffic, /pma?target=
// sends MADs, /pma/targets, /pma/routes and /prober/traces map the fabric): nullopt when `who` is authenticated or the operator allowed anonymous callers
// (`allow_setting`, e.g. "collectors.prober.probe_allow_unauthenticated", says how), else the 403
// to answer: "<what> refused: needs basic auth or a verified client certificate ...".
std::optional<HttpResponse> refuse_unauthenticated(const RequestIdentity& who, bool allow_unauthenticated,
                                                   std::string_view what, std::string_view allow_setting);

struct HttpPath {
  std::string path;  // exact match, e.g. "/probe"
  HttpPathHandler handler;
};

}  // namespace rdma::exporter
