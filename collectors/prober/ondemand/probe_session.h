// The verbs side of an on-demand probe (/probe, docs/probe.md): RDMA WRITE bandwidth or latency
// from one local port to a peer's responder. Each probe opens its own device context, CQ, buffer
// and queue pairs (one TCP handshake per QP, session hello of handshake.h) and frees all of them
// when it ends, so that it shares nothing with the prober's loop and survives a reload of it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectors/prober/ondemand/probe_module.h"
#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/verbs/verbs_util.h"

namespace rdma::collectors::prober {

struct SessionOptions {
  std::string secret;
  std::string node_name;
  std::string device_regex;  // the prober's device filter; empty = all
  std::chrono::milliseconds handshake_timeout{5000};
};

struct ProbeTarget {
  std::string address;  // numeric
  std::uint16_t tcp_port = 0;
  std::string device;   // empty: the first active port that can reach the address family
  std::uint32_t port = 0;
};

class ProbeSession {
 public:
  // Opens the local device and chooses the port; nullptr and `reason` (no_local_port, verbs)
  // when none fits.
  static std::unique_ptr<ProbeSession> open(const ProbeModule& m, const ProbeTarget& t, const SessionOptions& o,
                                            std::string& reason);
  ~ProbeSession();
  ProbeSession(const ProbeSession&) = delete;
  ProbeSession& operator=(const ProbeSession&) = delete;

  const std::string& device() const { return device_; }
  std::uint32_t port() const { return port_.num; }
  // Connects the queue pairs and runs the writes, all before `deadline`. Fills success/reason,
  // peer, writes, bytes, bandwidth and rtts of `r`.
  void run(Deadline deadline, ProbeResult& r);

 private:
  struct Qp;
  ProbeSession(const ProbeModule& m, const ProbeTarget& t, const SessionOptions& o);
  std::string connect(Qp& q, Deadline deadline, std::string& peer);
  std::string run_bandwidth(Deadline deadline, ProbeResult& r);
  std::string run_latency(Deadline deadline, ProbeResult& r);

  ProbeModule m_;
  ProbeTarget t_;
  SessionOptions o_;
  std::string device_;
  VerbsPort port_;
  int sgid_ = -1;
  Gid gid_{};
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<std::uint8_t> buf_;
  ibv_mr* mr_ = nullptr;
  std::vector<std::unique_ptr<Qp>> qps_;
};

}  // namespace rdma::collectors::prober
