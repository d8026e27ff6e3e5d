// When the prober's flows are traced (docs/prober.md, "Path tracing"): a bounded queue of trace
// requests, fresh traces (a flow the last window judged lossy) before the others, at most one
// trace in flight per link, every packet paced by a token bucket of its local port, run by a
// small pool of background threads ("prober-trace") over a PathTracer (the socket one, or a fake
// in the tests): traces of different links run at once, so one trace's silent waits do not hold
// the others back; the buckets alone bound the packets. The engine's loop requests and cancels
// and takes the results; nothing here blocks it.
//
// Why a bucket per local port: switches answer TTL-expired packets from their CPU, policed by
// CoPP, and a node that starts with many links would otherwise send one trace per flow at once
// into the same first-hop switch. Each trace costs every router on its path one answer, so the
// bucket bounds what any one switch answers for this node's port.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectors/prober/wire/path_tracer.h"
#include "collectors/prober/wire/trace_packet.h"
#include "exporter/thread.h"

namespace rdma::collectors::prober {

struct TraceJob {
  std::uint64_t link = 0;
  std::uint32_t flow_label = 0;  // the flow's label when asked: a result for an older label is stale
  std::string local;             // "device/port": whose bucket paces it
  TraceTarget target;
  TraceOptions options;
  bool fresh = false;            // the flow turned lossy: runs before every plain trace
};

struct TraceDone {
  TraceJob job;
  TraceOutcome outcome;
  double seconds = 0;  // how long the trace took
  std::chrono::steady_clock::time_point started{};  // when it began (the scheduler's clock)
};

struct TraceSchedulerConfig {
  double rate = 10;   // trace packets per second per local port
  double burst = 10;  // and at once
  std::size_t max_queued = 4096;  // requests waiting (one per link at most), and results not yet taken
  unsigned workers = 8;           // traces in flight at once (each one socket and one thread)
  unsigned per_port = 1;          // of them on one local port: its traces ask the same routers to
                                  // answer the same address, so they take turns
  // Trace starts per local port: one token per start_interval, start_burst at once (a zero
  // interval: unpaced). Each trace asks every router on its path for one answer to the port's
  // address, and Linux-based switches answer one ICMP error per second per destination with a
  // burst of 6 (icmp_ratelimit, the inetpeer bucket): starting faster reads '*' hops.
  std::chrono::milliseconds start_interval{1000};
  double start_burst = 6;
};

struct TraceCounters {
  std::map<std::string, std::uint64_t> results;  // complete, partial, or the failure reason
  std::uint64_t packets = 0, answers = 0;
  std::map<std::string, std::uint64_t> ignored;  // ICMP answers not taken, by reason (path_tracer.h)
  std::uint64_t queue_full = 0;  // requests dropped: the queue held max_queued
  // available, or the reason traces cannot run on this host (permission, socket): the last
  // trace's setup says; a per-flow reason (port_in_use, no_route, no_answer) leaves it.
  std::string state = "available";
  std::size_t queued = 0;
};

class TraceScheduler {
 public:
  using Clock = std::chrono::steady_clock;
  // Tests replace the clock and the sleep (which returns false when the scheduler stops).
  struct Clockwork {
    std::function<Clock::time_point()> now;
    std::function<bool(Clock::time_point)> sleep_until;
  };
  TraceScheduler(TraceSchedulerConfig cfg, PathTracer& tracer, Clockwork clock = {});
  ~TraceScheduler();
  TraceScheduler(const TraceScheduler&) = delete;
  TraceScheduler& operator=(const TraceScheduler&) = delete;

  void start();  // the worker threads
  void stop();   // ends the traces in progress at their next packet (within one hop timeout), joins

  // The engine's loop. A link has at most one request waiting: a new one replaces it (a fresh
  // one moves it ahead). False when the queue is full (counted).
  bool request(TraceJob job);
  // The link closed or its flow was re-created: its waiting request goes; a trace in flight for it
  // is dropped when it ends.
  void cancel(std::uint64_t link);
  std::vector<TraceDone> take_results();
  TraceCounters counters() const;

  // One job, on the calling thread (the worker's step; tests call it without start()): false
  // when none is waiting.
  bool run_next();

 private:
  bool pace(const std::string& local, bool starting);
  void worker();
  bool can_run(const TraceJob& j) const;  // its link has no trace in flight, its port room (mu_ held)
  bool runnable() const;                  // a waiting job can_run (mu_ held)

  TraceSchedulerConfig cfg_;
  PathTracer& tracer_;
  Clockwork clock_;
  exporter::StopSignal stop_;
  mutable std::mutex mu_;
  std::condition_variable work_;
  bool stopping_ = false;
  std::deque<TraceJob> fresh_, plain_;
  std::set<std::uint64_t> in_flight_, cancelled_;
  std::map<std::string, unsigned> local_in_flight_;  // traces in flight per local port
  std::vector<TraceDone> results_;
  TraceCounters counters_;
  std::mutex buckets_mu_;  // the workers share a local port's bucket
  std::map<std::string, TokenBucket> buckets_;  // packets, per local port
  std::map<std::string, TokenBucket> starts_;   // trace starts, per local port
  std::vector<std::thread> threads_;
};

}  // namespace rdma::collectors::prober
