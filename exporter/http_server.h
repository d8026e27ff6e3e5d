// HTTP(S) on CivetWeb behind an accept-side gate (exporter/http_gate.h): the telemetry path, a landing page at "/", "/healthz", and the paths
// collectors serve (HttpHandlers::extra_path, exporter/http_handler.h). Nothing else answers (404;
// methods other than GET/HEAD get 405). Hardening (docs/security.md):
//  - TLS from a web config (exporter-toolkit format) through an SSL_CTX built here and handed to
//    civetweb (external_ssl_ctx); the OpenSSL 3 crash is avoided by exporter/tls/ (the shim).
//  - HTTP basic auth (bcrypt) on every path but /healthz, which reveals nothing and must answer
//    the kubelet's plain httpGet probes.
//  - A connection reaches a civetweb worker only once its request head has arrived, within
//    head_timeout_ms (the gate); /healthz is answered by the gate itself.
//  - At most max_concurrent_scrapes requests run the scrape at once, and apart from them at most
//    max_concurrent_other requests a collector's path (/pma, /probe, ...): the excess get 503 at
//    once, and no flood of the other paths takes a scrape's slot.
//  - A scraper's X-Prometheus-Scrape-Timeout-Seconds, less timeout_offset, is handed to the
//    metrics handler as the time the client will wait.
//  - request_timeout_ms bounds every socket read/write; max_request_size bounds the request
//    head; a GET/HEAD with a body gets 413.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "exporter/http_gate.h"
#include "exporter/http_handler.h"
#include "exporter/web_config.h"

struct mg_context;
struct mg_connection;

namespace rdma::exporter {

struct HttpOptions {
  std::string listen_address = ":9661";   // [host]:port; civetweb in Debian has no IPv6
  std::string telemetry_path = "/metrics";
  int threads = 72;                        // civetweb holds one per keep-alive connection
  int request_timeout_ms = 10000;
  int head_timeout_ms = 1000;              // accept to complete request head (the gate)
  int max_concurrent_scrapes = 64;         // 0: no limit
  int max_concurrent_other = 32;           // collectors' paths; 0: no limit
  std::chrono::milliseconds timeout_offset{500};  // subtracted from the scraper's timeout header
  std::size_t max_request_size = 16384;    // bytes of request line + headers
  WebConfig web;                           // TLS and basic auth (default: neither)
};

struct HttpHandlers {
  // Renders the whole exposition; shared, so that a large text is never copied per request.
  // client_timeout: how long the scraper waits for the answer (its header less the offset), when
  // it said so.
  std::function<std::shared_ptr<const std::string>(std::optional<std::chrono::milliseconds> client_timeout)>
      metrics_text;
  std::function<std::string()> landing_html;
  // Paths served for collectors (exporter/http_handler.h): nullopt when none serves `path` (404).
  // Admitted in their own pool (max_concurrent_other), never in the scrapes' slots.
  std::function<std::optional<HttpResponse>(std::string_view path, std::string_view query)> extra_path;
};

// Requests refused by the server, by reason; read for rdma_exporter_http_requests_rejected_total.
struct HttpStats {
  std::atomic<std::uint64_t> too_many_scrapes{0};  // 503
  std::atomic<std::uint64_t> unauthorized{0};      // 401
  std::atomic<std::uint64_t> not_found{0};         // 404
  std::atomic<std::uint64_t> bad_method{0};        // 405
  std::atomic<std::uint64_t> too_large{0};         // 413
  std::atomic<std::uint64_t> scrape_failed{0};     // 500
  std::atomic<std::uint64_t> too_many_other{0};    // 503 on a collector's path
  HttpGateStats gate;                              // closed before a head arrived
};

class HttpServer {
 public:
  // Throws std::runtime_error on bind failure or a TLS setup error (bad key, cert/key mismatch).
  HttpServer(HttpOptions opts, HttpHandlers handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Port actually bound (useful with port 0 in tests).
  int port() const { return port_; }
  bool tls() const { return opts_.web.tls.has_value(); }
  // SIGHUP: new certificate/key/client CA files and basic-auth users for every connection from
  // now on. Throws (changing nothing) on a TLS error, or when TLS would be switched on or off,
  // which needs a restart.
  void reload_web_config(const WebConfig& next);
  const HttpStats& stats() const { return stats_; }

 private:
  static int dispatch(mg_connection* conn, void* self);
  static int external_ssl_ctx(void** ssl_ctx, void* self);
  int handle(mg_connection* conn);
  int serve_metrics(mg_connection* conn);
  // Counts one in `in_flight`; over `limit` (> 0) answers 503, counts the refusal and undoes it.
  bool admit(mg_connection* conn, std::atomic<int>& in_flight, int limit, std::atomic<std::uint64_t>& refused,
             const char* why);
  static bool verifies_client_certs(const WebConfig& web);
  HttpOptions opts_;
  HttpHandlers handlers_;
  std::mutex auth_mu_;
  std::shared_ptr<BasicAuthenticator> auth_;  // replaced whole on reload
  bool verifies_client_certs_ = false;        // under auth_mu_: a presented client cert was verified
  HttpStats stats_;
  std::atomic<int> scrapes_in_flight_{0};
  std::atomic<int> other_in_flight_{0};
  void* ssl_ctx_ = nullptr;  // SSL_CTX* until civetweb takes it
  std::unique_ptr<HttpGate> gate_;  // the public port
  mg_context* ctx_ = nullptr;
  int port_ = 0;          // the gate's
  int backend_port_ = 0;  // civetweb's, on 127.0.0.1
};

// The value of X-Prometheus-Scrape-Timeout-Seconds (decimal seconds, e.g. "10" or "9.5") less
// offset: the time left to answer. The offset is kept only while it leaves a positive time (a
// 0.4 s header with a 0.5 s offset gives 0.4 s, as the blackbox exporter does). nullopt for a
// missing, empty, non-numeric, non-finite, zero or negative value: the header is then ignored.
std::optional<std::chrono::milliseconds> scrape_timeout_from_header(const char* value,
                                                                    std::chrono::milliseconds offset);

// ":9661" -> "0.0.0.0:9661", "127.0.0.1:9661" unchanged; throws std::invalid_argument.
std::string civetweb_listening_port(const std::string& listen_address);

}  // namespace rdma::exporter
