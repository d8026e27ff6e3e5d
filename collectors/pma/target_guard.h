// What keeps /pma?target= from being a MAD generator for whoever can reach the exporter: each
// request would otherwise send a node's MADs at once (8 local clients drove 18,936 MADs/s at one
// simulated leaf). Three bounds, all in front of the read:
//  - TargetReads: concurrent requests for one read share it (single-flight), and a finished read
//    answers the same request again for `ttl` (the read is what costs, not the answer);
//  - MadBucket: a token bucket of MADs per second that every target read takes from, retries
//    included, so that the fabric sees at most `rate` MADs/s from target mode whatever the clients do;
//  - target_counters(): the rdma_pma_fabric_target_* counters live for the process, not for one
//    collector instance, so that a reload that rebuilds the collector does not restart them at 0.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace rdma::collectors::pma {

// The answer to one target request (the HTTP layer wraps it).
struct TargetAnswer {
  int status = 200;
  std::string body;
  std::string result;       // rdma_pma_fabric_target_requests_total's label: ok, partial, unreachable, ...
  std::uint64_t mads = 0;   // MADs this read sent (0 for an answer shared or served from the cache)
};

class MadBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // rate MADs per second, bursts of up to one second's worth (at least `min_burst`).
  MadBucket(double rate, double min_burst);
  // Takes n tokens; when the bucket holds fewer, reserves them and sleeps until they have accrued,
  // unless that would be after `deadline`: then takes nothing and returns false.
  bool take(double n, Clock::time_point deadline);
  // MADs sent beyond those taken (retries): the bucket goes into debt, later reads wait for it.
  void debit(double n);

 private:
  void refill(Clock::time_point now);
  const double rate_, burst_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
};

class TargetReads {
 public:
  using Clock = std::chrono::steady_clock;
  TargetReads(std::chrono::milliseconds ttl, std::size_t max_entries) : ttl_(ttl), max_entries_(max_entries) {}
  // The answer for `key`: the one a read finished less than ttl ago, the one another thread is
  // reading now (waited for, until `deadline`: then a 503 with result "busy"), or read() run on
  // this thread. *shared says which.
  TargetAnswer get(const std::string& key, const std::function<TargetAnswer()>& read, bool* shared,
                   Clock::time_point deadline = Clock::time_point::max());

 private:
  struct Entry {
    std::shared_ptr<const TargetAnswer> answer;  // null while the read runs
    Clock::time_point done;
  };
  void prune(Clock::time_point now);  // under mu_
  const std::chrono::milliseconds ttl_;
  const std::size_t max_entries_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> entries_;
};

// What keeps /pma/routes and /pma/routes/suspects from being a fabric map and a CPU sink for
// whoever reaches the exporter (every port is reachable by a tenant): after the access rule of
// /probe (exporter::refuse_unauthenticated, in the handler), one computation at a time -- a second
// request while one runs is refused, not queued -- and `rate` requests per second (a MadBucket of
// requests, bursts of one second's worth). Refusals are 429 with Retry-After.
class RouteGate {
 public:
  explicit RouteGate(double rate) : bucket_(rate, 1), retry_after_s_(rate >= 1 ? 1 : static_cast<int>(1 / rate + 0.999)) {}
  struct Admission {
    std::unique_lock<std::mutex> held;  // the computation slot; empty when refused
    std::string refused;                // "" (admitted), "busy" or "rate_limited"
  };
  // Never blocks: the slot is taken with try_lock, the token without waiting.
  Admission admit();
  int retry_after_s() const { return retry_after_s_; }

 private:
  std::mutex computing_;
  MadBucket bucket_;
  const int retry_after_s_;
};

// Process-lifetime counters of target mode (rdma_pma_fabric_target_requests_total{result},
// rdma_pma_fabric_target_mads_total).
struct TargetCounters {
  std::mutex mu;
  std::map<std::string, std::uint64_t> requests;  // by result
  std::map<std::string, std::uint64_t> route_requests;  // /pma/routes and /pma/routes/suspects, by result
  std::uint64_t mads = 0;
};
TargetCounters& target_counters();

}  // namespace rdma::collectors::pma
