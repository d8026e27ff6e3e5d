// The responder side of the prober: a thread that accepts handshakes on the listening socket and
// owns the responder queue pairs, one per accepted hello, each living as long as its TCP
// connection (the prober closes it on teardown; a probe session when it ends). Probes of the
// prober write into the device's buffer; a probe session's hello gets a buffer of its own,
// within TransportOptions::session_max_bytes.
//
// Whoever reaches the port is a stranger (no secret: anyone), so the thread is an event loop over
// non-blocking sockets: every connection not yet handshaken (pending) advances as its bytes come
// and has its own deadline (responder_pending_timeout from its accept, never more than the
// handshake timeout), so an idle, slow or malicious connection never delays another's handshake.
// Pending connections are bounded per source address and in total, and a newcomer is never
// refused: beyond a bound the responder closes the oldest pending connection of the busiest
// source prefix or address instead (pending_admission.h; counted by reason in evicted()), so that
// no set of addresses can keep a real peer out. Served QPs are bounded per source address too
// (then: busy). A served connection has TCP keepalive and TCP_USER_TIMEOUT (served_keepalive): a
// peer that vanishes without a FIN has its QP freed within that bound. A thread that stops for
// any other reason than stop() clears up() and logs an error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/verbs/verbs_util.h"

namespace rdma::collectors::prober {

struct TransportOptions;

class Responder {
 public:
  // `opts` and `devices` must outlive the responder (the transport owns all three).
  Responder(const TransportOptions& opts, std::uint64_t instance, const std::vector<std::unique_ptr<ProbeDevice>>& devices);
  ~Responder();
  // Listens and starts the thread; throws std::runtime_error when it cannot listen.
  void start();
  void stop();

  std::map<std::string, std::uint64_t> handshakes() const;  // by result: ok, ok_session, bad_mac, busy, ...
  // Connections that could not be accepted, by reason: accept (errors).
  std::map<std::string, std::uint64_t> refused() const;
  // Pending connections closed for a newcomer, by the bound it met: pending_per_source (its
  // address's oldest), pending_total (the busiest prefix's oldest).
  std::map<std::string, std::uint64_t> evicted() const;
  std::uint64_t qps() const { return qps_.load(); }
  std::uint64_t pending() const { return pending_count_.load(); }
  // Served connections closed by the kernel's liveness checks (keepalive, user timeout): their
  // peer vanished without a FIN.
  std::uint64_t dead_peers() const { return dead_peers_.load(); }
  // The TCP port it listens on (the configured one, or the kernel's choice for port 0).
  std::uint16_t port() const;
  // True from start() until stop(); false when the thread ended on its own (an error).
  bool up() const { return up_.load(); }
  double cpu_seconds() const { return cpu_.load(std::memory_order_relaxed); }

 private:
  struct ServedQp;
  struct Pending;
  struct Loop;
  void main();
  void run(Loop& loop);
  void accept_all(Loop& loop);
  // Advances one pending connection as far as its socket allows; true when it is finished (its
  // result counted, promoted to served or closed).
  bool pump(Loop& loop, Pending& p);
  void finish(Loop& loop, Pending& p, std::string result);
  // The answer to one decoded frame: a reply frame to send (empty: none) and the result label;
  // on "ok"/"ok_session", s holds the connected QP (and a session's buffer).
  std::string answer(ServedQp& s, const std::vector<std::uint8_t>& frame, const Nonce& nonce, const std::string& source,
                     const Loop& loop, std::vector<std::uint8_t>& reply);
  void count(std::map<std::string, std::uint64_t>& m, const std::string& key);
  std::chrono::milliseconds pending_timeout() const;

  const TransportOptions& opts_;
  const std::uint64_t instance_;
  const std::vector<std::unique_ptr<ProbeDevice>>& devices_;
  Fd listen_, stop_;
  std::thread thread_;
  mutable std::mutex mu_;  // handshakes_, refused_, evicted_
  std::map<std::string, std::uint64_t> handshakes_, refused_, evicted_;
  std::atomic<std::uint64_t> qps_{0}, pending_count_{0}, dead_peers_{0};
  std::atomic<bool> up_{false};
  std::atomic<double> cpu_{0};
};

}  // namespace rdma::collectors::prober
