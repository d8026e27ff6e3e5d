#include "exporter/http_server.h"

#include <civetweb.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <stdexcept>

#include "exporter/exposition.h"

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

// Civetweb logs through this callback; route it to spdlog instead of stderr.
int log_message(const mg_connection*, const char* message) {
  spdlog::debug("civetweb: {}", message);
  return 1;
}

}  // namespace

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
    : opts_(std::move(opts)), handlers_(std::move(handlers)) {
  std::string ports = civetweb_listening_port(opts_.listen_address);
  std::string threads = std::to_string(opts_.threads);
  std::string timeout = std::to_string(opts_.request_timeout_ms);
  // Keep-alive with tcp_nodelay: Prometheus reuses connections; without nodelay each reply
  // waits 40 ms on delayed ACKs.
  const char* options[] = {"listening_ports",   ports.c_str(), "num_threads", threads.c_str(),
                           "request_timeout_ms", timeout.c_str(), "enable_keep_alive", "yes",
                           "tcp_nodelay", "1", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = log_message;
  mg_init_library(0);
  ctx_ = mg_start(&callbacks, this, options);
  if (!ctx_) throw std::runtime_error("cannot listen on " + opts_.listen_address + " (address in use or invalid?)");
  mg_set_request_handler(ctx_, "/", &HttpServer::dispatch, this);
  mg_server_port sp[4];
  int n = mg_get_server_ports(ctx_, 4, sp);
  if (n > 0) port_ = sp[0].port;
}

HttpServer::~HttpServer() {
  if (ctx_) mg_stop(ctx_);
}

int HttpServer::dispatch(mg_connection* conn, void* self) { return static_cast<HttpServer*>(self)->handle(conn); }

int HttpServer::handle(mg_connection* conn) {
  const mg_request_info* ri = mg_get_request_info(conn);
  std::string_view method = ri->request_method;
  std::string_view uri = ri->local_uri ? ri->local_uri : "";
  if (method != "GET" && method != "HEAD") {
    send(conn, 405, "Method Not Allowed", "text/plain; charset=utf-8", "method not allowed\n", "Allow: GET, HEAD\r\n");
    return 405;
  }
  if (uri == opts_.telemetry_path) {
    std::string text;
    try {
      text = handlers_.metrics_text();
    } catch (const std::exception& e) {
      spdlog::error("scrape failed: {}", e.what());
      send(conn, 500, "Internal Server Error", "text/plain; charset=utf-8", "scrape failed\n");
      return 500;
    }
    const char* ae = mg_get_header(conn, "Accept-Encoding");
    if (ae && accepts_gzip(ae)) {
      std::string gz = gzip_compress(text);
      if (!gz.empty()) {
        send(conn, 200, "OK", kTextContentType, gz, "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n");
        return 200;
      }
    }
    send(conn, 200, "OK", kTextContentType, text, "Vary: Accept-Encoding\r\n");
    return 200;
  }
  if (uri == "/healthz") {
    send(conn, 200, "OK", "text/plain; charset=utf-8", "ok\n");
    return 200;
  }
  if (uri == "/") {
    send(conn, 200, "OK", "text/html; charset=utf-8", handlers_.landing_html());
    return 200;
  }
  send(conn, 404, "Not Found", "text/plain; charset=utf-8", "not found\n");
  return 404;
}

}  // namespace rdma::exporter
