// The accept side of the HTTP server (exporter/http_server.h): one event-loop thread owns the
// public listening socket, holds every new connection until its request head has arrived, and
// only then hands it to civetweb, which listens on loopback only. Why: civetweb 1.15 gives every
// accepted connection a worker thread that then blocks reading the head for up to
// request_timeout_ms, so silent or slowly-sending connections (more than the listen backlog
// defeats TCP_DEFER_ACCEPT through SYN cookies; one byte defeats it anyway) held every worker and
// /healthz and the scrapes queued behind them for seconds. Here a connection costs a few hundred
// bytes and no thread until its head is complete, and is closed when the head has not arrived
// within head_deadline; the oldest such connection makes room when max_pending are waiting.
// `GET`/`HEAD /healthz` (plain HTTP) is answered by this thread itself, so no scrape and no
// attacker can occupy the path the kubelet probes. Every other connection is relayed byte for
// byte to civetweb (TLS included: the gate waits for the whole first TLS record, the
// ClientHello, and civetweb terminates TLS, so client certificates keep working).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

namespace rdma::exporter {

struct HttpGateOptions {
  std::string listen_address;                      // "host:port" (civetweb_listening_port form)
  bool tls = false;                                // the first bytes are a TLS record, not a head
  std::chrono::milliseconds head_deadline{1000};   // from accept to a complete head (or ClientHello)
  std::chrono::milliseconds idle_timeout{10000};   // to reach civetweb, and for civetweb's last answer to go out
  std::size_t max_head = 16384;                    // a longer head is relayed as is (civetweb refuses it)
  std::size_t max_pending = 1024;                  // connections whose head has not arrived
  std::size_t max_relayed = 1024;                  // connections relayed to civetweb at once
};

struct HttpGateStats {
  std::atomic<std::uint64_t> head_timeout{0};  // closed: no complete head within head_deadline
  std::atomic<std::uint64_t> evicted{0};       // closed: the oldest waiting head when max_pending were waiting
  std::atomic<std::uint64_t> relay_full{0};    // closed: max_relayed connections already relayed
  std::atomic<std::uint64_t> healthz{0};       // /healthz answered by the gate
};

// What the gate does with the bytes a new connection has sent so far (at most max_head of them):
// wait for more, answer /healthz itself (GET or HEAD of /healthz, any query, no body, nothing
// pipelined behind it; plain HTTP only), or relay the connection to civetweb (a complete head,
// TLS' whole first record, or max_head bytes without either: civetweb refuses what is malformed).
enum class HeadVerdict { kWait, kHealthzGet, kHealthzHead, kRelay };
HeadVerdict classify_head(std::string_view bytes, bool tls, std::size_t max_head);

class HttpGate {
 public:
  // Binds and listens on opts.listen_address; throws std::runtime_error when it cannot.
  HttpGate(HttpGateOptions opts, HttpGateStats& stats);
  ~HttpGate();  // stops the thread and closes every connection it holds
  HttpGate(const HttpGate&) = delete;
  HttpGate& operator=(const HttpGate&) = delete;
  int port() const { return port_; }
  // Starts relaying to civetweb at 127.0.0.1:backend_port. Before this, connections wait.
  void start(int backend_port);

 private:
  void run();
  HttpGateOptions opts_;
  HttpGateStats& stats_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop
  int port_ = 0;
  int backend_port_ = 0;
  std::thread thread_;
};

}  // namespace rdma::exporter
