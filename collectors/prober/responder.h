// The responder side of the prober: a thread that accepts handshakes on the listening socket and
// owns the responder queue pairs, one per accepted hello, each living as long as its TCP
// connection (the prober closes it on teardown; a probe session when it ends). Probes of the
// prober write into the device's buffer; a probe session's hello gets a buffer of its own,
// within TransportOptions::session_max_bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/prober/handshake_io.h"
#include "collectors/prober/verbs_util.h"

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
  std::uint64_t qps() const { return qps_.load(); }
  double cpu_seconds() const { return cpu_.load(std::memory_order_relaxed); }

 private:
  struct ServedQp;
  void main();
  void accept_one(std::vector<std::unique_ptr<ServedQp>>& served, std::size_t& session_bytes);
  std::string answer_hello(ServedQp& s, std::size_t served, std::size_t session_bytes);

  const TransportOptions& opts_;
  const std::uint64_t instance_;
  const std::vector<std::unique_ptr<ProbeDevice>>& devices_;
  Fd listen_, stop_;
  std::thread thread_;
  mutable std::mutex mu_;  // handshakes_
  std::map<std::string, std::uint64_t> handshakes_;
  std::atomic<std::uint64_t> qps_{0};
  std::atomic<double> cpu_{0};
};

}  // namespace rdma::collectors::prober
