// HTTP on CivetWeb: the telemetry path, a landing page at "/", "/healthz". Nothing else answers.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

struct mg_context;
struct mg_connection;

namespace rdma::exporter {

struct HttpOptions {
  std::string listen_address = ":9661";   // [host]:port; civetweb in Debian has no IPv6
  std::string telemetry_path = "/metrics";
  int threads = 8;
  int request_timeout_ms = 30000;
};

struct HttpHandlers {
  std::function<std::string()> metrics_text;  // renders the whole exposition
  std::function<std::string()> landing_html;
};

class HttpServer {
 public:
  HttpServer(HttpOptions opts, HttpHandlers handlers);  // throws std::runtime_error on bind failure
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Port actually bound (useful with port 0 in tests).
  int port() const { return port_; }

 private:
  static int dispatch(mg_connection* conn, void* self);
  int handle(mg_connection* conn);
  HttpOptions opts_;
  HttpHandlers handlers_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

// ":9661" -> "0.0.0.0:9661", "127.0.0.1:9661" unchanged; throws std::invalid_argument.
std::string civetweb_listening_port(const std::string& listen_address);

}  // namespace rdma::exporter
