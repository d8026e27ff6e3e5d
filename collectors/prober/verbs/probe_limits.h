// The prober's memory and size limits, shared by the on-demand probe modules (probe_module.h)
// and the transport's responder (transport_options.h): one number for each bound, read by both.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace rdma::collectors::prober {

// Hard limits of a module's settings (checked when the config is read).
struct ProbeLimits {
  static constexpr std::uint32_t kMaxSize = 16u << 20;
  static constexpr std::uint32_t kMaxQps = 16;
  static constexpr std::uint64_t kMaxIterations = 10'000'000;
  static constexpr std::uint64_t kMaxLatencyIterations = 1'000'000;  // each RTT is kept until the percentiles
  static constexpr std::chrono::milliseconds kMaxDuration{60000};
  static constexpr std::uint32_t kMaxTxDepth = 1024;
  static constexpr std::chrono::milliseconds kMaxTimeout{120000};
  static constexpr std::size_t kMaxModules = 64;
  // Memory (docs/probe.md, "Memory"). A probe registers one buffer of `size` here and asks its
  // target's responder for `size` per QP: size x qps of a module is at most kMaxSessionBytes.
  static constexpr std::size_t kMaxSessionBytes = 16u << 20;
  // The buffers of all probes this node runs at once (SessionBudget; beyond: memory_budget).
  static constexpr std::size_t kLocalSessionBytes = 32u << 20;
  // The session buffers a responder registers for other nodes' probes at once (its
  // TransportOptions::session_max_bytes; beyond: rejected_busy): kMaxSessionBytes x 4.
  static constexpr std::size_t kResponderSessionBytes = 64u << 20;
  // The most a node holds for probe sessions, whoever asks: what the DaemonSet's memory limit
  // must leave room for beside the exporter's own (tests/prober/session_memory_test.cpp).
  static constexpr std::size_t kWorstCaseSessionBytes = kLocalSessionBytes + kResponderSessionBytes;
};

}  // namespace rdma::collectors::prober
