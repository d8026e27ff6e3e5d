#include "exporter/http_server.h"

#include <civetweb.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <stdexcept>
#include <utility>

#include "exporter/exposition.h"
#include "exporter/tls/openssl_api.h"

namespace rdma::exporter {
namespace {

void send(mg_connection* conn, int status, std::string_view status_text, std::string_view content_type,
          std::string_view body, std::string_view extra_headers = {}) {
  mg_printf(conn,
            "HTTP/1.1 %d %.*s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n%.*sCache-Control: no-store\r\n\r\n",
            status, static_cast<int>(status_text.size()), status_text.data(), static_cast<int>(content_type.size()),
            content_type.data(), body.size(), static_cast<int>(extra_headers.size()), extra_headers.data());
  const mg_request_info* ri = mg_get_request_info(conn);
  if (ri && std::strcmp(ri->request_method, "HEAD") == 0) return;
  mg_write(conn, body.data(), body.size());
}

// A scrape's text (the telemetry path, or a collector's path answering the text format such as
// /pma?target=): gzip when the client accepts it, as Prometheus always does. A /pma answer for a
// one-port node is mostly HELP and TYPE lines, which compress to a fraction.
void send_text(mg_connection* conn, int status, std::string_view status_text, std::string_view content_type,
               std::string_view text) {
  const char* ae = mg_get_header(conn, "Accept-Encoding");
  if (ae && accepts_gzip(ae)) {
    std::string gz = gzip_compress(text);
    if (!gz.empty()) {
      send(conn, status, status_text, content_type, gz, "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n");
      return;
    }
  }
  send(conn, status, status_text, content_type, text, "Vary: Accept-Encoding\r\n");
}

// Civetweb logs through this callback; route it to spdlog instead of stderr.
int log_message(const mg_connection*, const char* message) {
  spdlog::debug("civetweb: {}", message);
  return 1;
}

thread_local std::optional<std::chrono::milliseconds> t_request_timeout;
thread_local RequestIdentity t_request_identity;

}  // namespace

std::optional<std::chrono::milliseconds> request_scrape_timeout() { return t_request_timeout; }
const RequestIdentity& request_identity() { return t_request_identity; }

std::optional<HttpResponse> refuse_unauthenticated(const RequestIdentity& who, bool allow_unauthenticated,
                                                   std::string_view what, std::string_view allow_setting) {
  if (who.authenticated() || allow_unauthenticated) return std::nullopt;
  return HttpResponse{403, "text/plain; charset=utf-8",
                      std::string(what) + " refused: needs basic auth or a verified client certificate (--web.config.file), or " +
                          std::string(allow_setting) + ": true\n"};
}

std::optional<std::chrono::milliseconds> scrape_timeout_from_header(const char* value,
                                                                    std::chrono::milliseconds offset) {
  if (!value) return std::nullopt;
  std::string_view v(value);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  double seconds = 0;
  // from_chars: no locale, no leading '+', no hex; the whole value must be the number.
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds, std::chars_format::fixed);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !std::isfinite(seconds) || seconds <= 0)
    return std::nullopt;
  const double ms = std::min(seconds * 1000.0, 1e12);  // beyond any cap, and no overflow
  auto budget = std::chrono::milliseconds(static_cast<std::int64_t>(ms));
  if (budget.count() <= 0) return std::nullopt;  // under a millisecond
  if (budget > offset) budget -= offset;
  return budget;
}

std::string civetweb_listening_port(const std::string& listen_address) {
  if (listen_address.empty()) throw std::invalid_argument("empty listen address");
  if (listen_address.front() == '[')
    throw std::invalid_argument("IPv6 listen addresses are not supported by this CivetWeb build: " + listen_address);
  auto colon = listen_address.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("listen address needs a port: " + listen_address);
  std::string host = listen_address.substr(0, colon);
  std::string port = listen_address.substr(colon + 1);
  if (port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) > 65535)
    throw std::invalid_argument("invalid port in listen address: " + listen_address);
  if (host.empty()) host = "0.0.0.0";
  return host + ":" + port;
}

HttpServer::HttpServer(HttpOptions opts, HttpHandlers handlers)
    : opts_(std::move(opts)), handlers_(std::move(handlers)), auth_(std::make_shared<BasicAuthenticator>(opts_.web.basic_auth_users)),
      verifies_client_certs_(verifies_client_certs(opts_.web)) {
  // The public port is the gate's (exporter/http_gate.h); civetweb listens on loopback only and
  // sees a connection once its head has arrived.
  HttpGateOptions g;
  g.listen_address = civetweb_listening_port(opts_.listen_address);
  g.tls = opts_.web.tls.has_value();
  g.head_deadline = std::chrono::milliseconds(std::max(1, opts_.head_timeout_ms));
  g.idle_timeout = std::chrono::milliseconds(std::max(1, opts_.request_timeout_ms));
  g.max_head = opts_.max_request_size + 1;  // one byte over: civetweb sees the head is too large
  // Each relayed connection holds a worker or waits in civetweb's queue for one.
  g.max_relayed = static_cast<std::size_t>(opts_.threads) * 4 + 64;
  // Descriptors: a waiting head holds one, a relayed connection two (and civetweb's end one more);
  // a quarter of what the limit leaves after 256 for the rest of the process goes to each kind.
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    const auto share = static_cast<std::size_t>((lim.rlim_cur - std::min<rlim_t>(lim.rlim_cur, 256)) / 4);
    g.max_pending = std::clamp<std::size_t>(share, 16, 1024);
    g.max_relayed = std::clamp<std::size_t>(share / 3, 16, g.max_relayed);
  }
  try {
    gate_ = std::make_unique<HttpGate>(g, stats_.gate);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(e.what()) + " (address in use or invalid?)");
  }
  std::string ports = "127.0.0.1:0";
  if (opts_.web.tls) {
    ssl_ctx_ = tls::openssl().make_server_ctx(*opts_.web.tls, opts_.web.origin);
    ports += "s";
  }
  std::string threads = std::to_string(opts_.threads);
  std::string timeout = std::to_string(opts_.request_timeout_ms);
  std::string max_request = std::to_string(opts_.max_request_size);
  // Keep-alive with tcp_nodelay: Prometheus reuses connections; without nodelay each reply
  // waits 40 ms on delayed ACKs.
  const char* options[] = {"listening_ports",   ports.c_str(),   "num_threads",      threads.c_str(),
                           "request_timeout_ms", timeout.c_str(), "max_request_size", max_request.c_str(),
                           "enable_keep_alive", "yes",           "tcp_nodelay",      "1",
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = log_message;
  callbacks.external_ssl_ctx = &HttpServer::external_ssl_ctx;
  mg_init_library(opts_.web.tls ? MG_FEATURES_TLS : 0);
  ctx_ = mg_start(&callbacks, this, options);
  if (!ctx_) {
    if (ssl_ctx_) tls::openssl().free_server_ctx(ssl_ctx_);
    ssl_ctx_ = nullptr;
    gate_.reset();
    throw std::runtime_error("cannot start the HTTP workers for " + opts_.listen_address +
                             (opts_.web.tls ? " with TLS (libssl.so not loadable?)" : ""));
  }
  mg_set_request_handler(ctx_, "/", &HttpServer::dispatch, this);
  mg_server_port sp[4];
  int n = mg_get_server_ports(ctx_, 4, sp);
  if (n > 0) backend_port_ = sp[0].port;
  port_ = gate_->port();
  gate_->start(backend_port_);
}

// civetweb's master thread polls the listening socket in 2 s quanta and only then sees the stop
// flag, so mg_stop() alone takes up to 2 s. While it runs, poke the socket with empty loopback
// connections (every 50 ms) so that the poll returns at once: shutdown takes milliseconds.
// The gate goes first: its relayed connections end, so no worker waits on a client.
HttpServer::~HttpServer() {
  gate_.reset();  // no new connection, and the relayed ones end
  if (ctx_) {
    std::atomic<bool> stopped{false};
    const std::string host = "127.0.0.1";
    const int port = backend_port_;
    std::thread waker([&stopped, host, port] {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<std::uint16_t>(port));
      if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return;
      while (!stopped.load()) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
          (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
          ::close(fd);
        }
        for (int i = 0; i < 10 && !stopped.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    mg_stop(ctx_);
    stopped.store(true);
    waker.join();
  }
  if (ssl_ctx_) tls::openssl().free_server_ctx(ssl_ctx_);
}

void HttpServer::reload_web_config(const WebConfig& next) {
  if (next.tls.has_value() != tls())
    throw std::runtime_error((next.origin.empty() ? std::string("--web.config.file") : next.origin) +
                             ": switching TLS on or off needs a restart");
  void* ctx = next.tls ? tls::openssl().make_server_ctx(*next.tls, next.origin) : nullptr;  // may throw
  auto auth = std::make_shared<BasicAuthenticator>(next.basic_auth_users);
  if (ctx) tls::openssl().use_server_ctx(ctx);
  std::lock_guard lock(auth_mu_);
  auth_ = std::move(auth);
  verifies_client_certs_ = verifies_client_certs(next);
}

// A client certificate proves who the caller is only when the handshake checked it against the
// client CA; RequestClientCert and RequireAnyClientCert accept any certificate.
bool HttpServer::verifies_client_certs(const WebConfig& web) {
  return web.tls && !web.tls->client_ca_file.empty() &&
         (web.tls->client_auth == ClientAuth::kVerifyClientCertIfGiven ||
          web.tls->client_auth == ClientAuth::kRequireAndVerifyClientCert);
}

// civetweb asks for a context when it starts (*ssl_ctx == NULL: hand ours over, return 1) and
// again when it frees its own (non-NULL: return 0 so that civetweb frees it, as with its own).
int HttpServer::external_ssl_ctx(void** ssl_ctx, void* self) {
  auto* server = static_cast<HttpServer*>(self);
  if (*ssl_ctx != nullptr) return 0;
  if (!server->ssl_ctx_) return 0;  // plain HTTP
  *ssl_ctx = std::exchange(server->ssl_ctx_, nullptr);
  return 1;
}

int HttpServer::dispatch(mg_connection* conn, void* self) { return static_cast<HttpServer*>(self)->handle(conn); }

int HttpServer::handle(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  std::string_view method = ri->request_method;
  std::string_view uri = ri->local_uri ? ri->local_uri : "";
  // Liveness says nothing about the host, and the kubelet's httpGet probes carry no credentials.
  if (uri == "/healthz" && (method == "GET" || method == "HEAD") && ri->content_length <= 0) {
    send(conn, 200, "OK", "text/plain; charset=utf-8", "ok\n");
    return 200;
  }
  std::shared_ptr<BasicAuthenticator> auth;
  bool verifies_certs = false;
  {
    std::lock_guard lock(auth_mu_);
    auth = auth_;
    verifies_certs = verifies_client_certs_;
  }
  if (auth->enabled() && !auth->check(mg_get_header(conn, "Authorization"))) {
    ++stats_.unauthorized;
    send(conn, 401, "Unauthorized", "text/plain; charset=utf-8", "unauthorized\n",
         "WWW-Authenticate: Basic realm=\"rdma_exporter\", charset=\"UTF-8\"\r\n");
    return 401;
  }
  if (method != "GET" && method != "HEAD") {
    ++stats_.bad_method;
    send(conn, 405, "Method Not Allowed", "text/plain; charset=utf-8", "method not allowed\n", "Allow: GET, HEAD\r\n");
    return 405;
  }
  // Nothing here reads a body: refuse one rather than let civetweb drain it.
  if (ri->content_length > 0) {
    ++stats_.too_large;
    send(conn, 413, "Payload Too Large", "text/plain; charset=utf-8", "request body not accepted\n",
         "Connection: close\r\n");
    return 413;
  }
  if (uri == opts_.telemetry_path) return serve_metrics(conn);
  if (uri == "/") {
    send(conn, 200, "OK", "text/html; charset=utf-8", handlers_.landing_html());
    return 200;
  }
  if (handlers_.extra_path &&
      admit(conn, other_in_flight_, opts_.max_concurrent_other, stats_.too_many_other,
            "too many concurrent requests to collectors' paths (--web.max-concurrent-other-requests)\n")) {
    std::optional<HttpResponse> r;
    struct Timeout {  // the header's budget and the caller's identity, for this request only
      ~Timeout() { t_request_timeout.reset(), t_request_identity = {}; }
    } timeout_guard;
    t_request_timeout =
        scrape_timeout_from_header(mg_get_header(conn, "X-Prometheus-Scrape-Timeout-Seconds"), opts_.timeout_offset);
    if (auth->enabled())  // checked above
      if (auto cred = parse_basic_authorization(mg_get_header(conn, "Authorization")))
        t_request_identity.basic_auth_user = cred->first;
    t_request_identity.client_cert_verified = verifies_certs && ri->client_cert != nullptr;
    try {
      r = handlers_.extra_path(uri, ri->query_string ? ri->query_string : "");
    } catch (const std::exception& e) {
      r = HttpResponse{500, "text/plain; charset=utf-8", "internal error\n"};
      spdlog::error("handler of {} failed: {}", uri, e.what());
    }
    --other_in_flight_;
    if (r) {
      const char* status_text = r->status == 200 ? "OK" : r->status == 429 ? "Too Many Requests" : "Error";
      if (r->status == 200 && r->content_type == kTextContentType) send_text(conn, r->status, status_text, r->content_type, r->body);
      else send(conn, r->status, status_text, r->content_type, r->body,
                r->retry_after_s > 0 ? "Retry-After: " + std::to_string(r->retry_after_s) + "\r\n" : std::string());
      return r->status;
    }
  } else if (handlers_.extra_path) {
    return 503;
  }
  ++stats_.not_found;
  send(conn, 404, "Not Found", "text/plain; charset=utf-8", "not found\n");
  return 404;
}

bool HttpServer::admit(mg_connection* conn, std::atomic<int>& in_flight, int limit,
                       std::atomic<std::uint64_t>& refused, const char* why) {
  // Admission: the excess over the limit is refused at once, never queued.
  int now = ++in_flight;
  if (limit > 0 && now > limit) {
    --in_flight;
    ++refused;
    send(conn, 503, "Service Unavailable", "text/plain; charset=utf-8", why, "Retry-After: 1\r\n");
    return false;
  }
  return true;
}

int HttpServer::serve_metrics(mg_connection* conn) {
  if (!admit(conn, scrapes_in_flight_, opts_.max_concurrent_scrapes, stats_.too_many_scrapes,
             "too many concurrent scrapes (--web.max-concurrent-scrapes)\n"))
    return 503;
  struct InFlight {
    std::atomic<int>& n;
    ~InFlight() { --n; }
  } guard{scrapes_in_flight_};
  std::shared_ptr<const std::string> text;
  try {
    text = handlers_.metrics_text(
        scrape_timeout_from_header(mg_get_header(conn, "X-Prometheus-Scrape-Timeout-Seconds"), opts_.timeout_offset));
  } catch (const std::exception& e) {
    ++stats_.scrape_failed;
    spdlog::error("scrape failed: {}", e.what());
    send(conn, 500, "Internal Server Error", "text/plain; charset=utf-8", "scrape failed\n");
    return 500;
  }
  send_text(conn, 200, "OK", kTextContentType, *text);
  return 200;
}

}  // namespace rdma::exporter
