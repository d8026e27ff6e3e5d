#include "collectors/prober/engine/trace_scheduler.h"

#include <algorithm>
#include <utility>

namespace rdma::collectors::prober {

TraceScheduler::TraceScheduler(TraceSchedulerConfig cfg, PathTracer& tracer, Clockwork clock)
    : cfg_(cfg), tracer_(tracer), clock_(std::move(clock)) {
  if (!clock_.now) clock_.now = [] { return Clock::now(); };
  if (!clock_.sleep_until)
    clock_.sleep_until = [this](Clock::time_point t) {
      const auto d = t - Clock::now();
      return d <= Clock::duration::zero() ? !stop_.stopped() : !stop_.wait_for(d);
    };
  cfg_.rate = std::max(cfg_.rate, 0.001);
  cfg_.burst = std::max(cfg_.burst, 1.0);
  cfg_.max_queued = std::max<std::size_t>(cfg_.max_queued, 1);
  cfg_.workers = std::clamp(cfg_.workers, 1u, 64u);
  cfg_.per_port = std::clamp(cfg_.per_port, 1u, cfg_.workers);
  cfg_.start_interval = std::max(cfg_.start_interval, std::chrono::milliseconds::zero());
  cfg_.start_burst = std::max(cfg_.start_burst, 1.0);
}

TraceScheduler::~TraceScheduler() { stop(); }

void TraceScheduler::start() {
  if (!threads_.empty()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  stop_.reset();
  for (unsigned i = 0; i < cfg_.workers; ++i)
    threads_.push_back(exporter::named_thread("prober-trace", [this] { worker(); }));
}

void TraceScheduler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_.stop();
  work_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool TraceScheduler::request(TraceJob job) {
  std::lock_guard lock(mu_);
  for (auto* q : {&fresh_, &plain_}) {
    auto it = std::find_if(q->begin(), q->end(), [&](const TraceJob& j) { return j.link == job.link; });
    if (it == q->end()) continue;
    job.fresh = job.fresh || it->fresh;
    q->erase(it);
    break;
  }
  if (fresh_.size() + plain_.size() >= cfg_.max_queued) {
    ++counters_.queue_full;
    return false;
  }
  cancelled_.erase(job.link);
  (job.fresh ? fresh_ : plain_).push_back(std::move(job));
  work_.notify_one();
  return true;
}

void TraceScheduler::cancel(std::uint64_t link) {
  std::lock_guard lock(mu_);
  for (auto* q : {&fresh_, &plain_}) std::erase_if(*q, [link](const TraceJob& j) { return j.link == link; });
  if (in_flight_.count(link)) cancelled_.insert(link);
}

std::vector<TraceDone> TraceScheduler::take_results() {
  std::lock_guard lock(mu_);
  return std::exchange(results_, {});
}

TraceCounters TraceScheduler::counters() const {
  std::lock_guard lock(mu_);
  TraceCounters c = counters_;
  c.queued = fresh_.size() + plain_.size();
  return c;
}

bool TraceScheduler::pace(const std::string& local, bool starting) {
  // A trace's first packet waits for a start token, then every packet for a packet token.
  for (bool start = starting && cfg_.start_interval.count() > 0;;) {
    Clock::time_point next;
    {
      std::lock_guard lock(buckets_mu_);
      const auto now = clock_.now();
      if (start) {
        auto& s = starts_.try_emplace(local, 1000.0 / static_cast<double>(cfg_.start_interval.count()), cfg_.start_burst)
                      .first->second;
        if (s.take(now)) start = false;
        else next = s.next(now);
      }
      if (!start) {
        auto& b = buckets_.try_emplace(local, cfg_.rate, cfg_.burst).first->second;
        if (b.take(now)) return true;
        next = b.next(now);
      }
    }
    if (!clock_.sleep_until(next)) return false;
  }
}

bool TraceScheduler::can_run(const TraceJob& j) const {
  if (in_flight_.count(j.link)) return false;
  // per_port at most per local port (one by default): a port's traces ask the same routers to
  // answer the same address, and a port with many links waiting leaves workers for the others.
  auto it = local_in_flight_.find(j.local);
  return it == local_in_flight_.end() || it->second < cfg_.per_port;
}

bool TraceScheduler::runnable() const {
  for (auto* q : {&fresh_, &plain_})
    for (const auto& j : *q)
      if (can_run(j)) return true;
  return false;
}

bool TraceScheduler::run_next() {
  TraceJob job;
  {
    std::lock_guard lock(mu_);
    // Fresh first; inside a queue, the oldest whose link has no trace in flight (and whose port
    // has room).
    bool found = false;
    for (auto* q : {&fresh_, &plain_}) {
      auto it = std::find_if(q->begin(), q->end(), [this](const TraceJob& j) { return can_run(j); });
      if (it == q->end()) continue;
      job = std::move(*it);
      q->erase(it);
      found = true;
      break;
    }
    if (!found) return false;
    in_flight_.insert(job.link);
    ++local_in_flight_[job.local];
  }
  // A trace begins when its first packet may go (its start token taken), not when a worker took it.
  auto t0 = clock_.now();
  bool first = true;
  TraceOutcome out = tracer_.trace(job.target, job.options, [this, &job, &first, &t0] {
    const bool ok = pace(job.local, first);
    if (std::exchange(first, false) && ok) t0 = clock_.now();
    return ok;
  });
  const double seconds = std::chrono::duration<double>(clock_.now() - t0).count();
  std::lock_guard lock(mu_);
  in_flight_.erase(job.link);
  if (auto it = local_in_flight_.find(job.local); it != local_in_flight_.end() && --it->second == 0) local_in_flight_.erase(it);
  work_.notify_all();  // a request of this link waiting behind it may run now
  counters_.packets += out.packets;
  counters_.answers += out.answers;
  for (const auto& [reason, n] : out.ignored) counters_.ignored[reason] += n;
  const std::string result = !out.failure.empty() ? out.failure : out.complete ? "complete" : "partial";
  ++counters_.results[result];
  if (out.failure == "permission" || out.failure == "socket") counters_.state = out.failure;
  else if (out.failure.empty()) counters_.state = "available";
  if (cancelled_.erase(job.link)) return true;  // the flow it traced is gone
  if (results_.size() >= cfg_.max_queued) results_.erase(results_.begin());  // the loop stalled: keep the newest
  results_.push_back({std::move(job), std::move(out), seconds, t0});
  return true;
}

void TraceScheduler::worker() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // Woken by request() and stop(); the timeout is a guard only.
      work_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_ || runnable(); });
      if (stopping_) return;
    }
    while (run_next()) {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
  }
}

}  // namespace rdma::collectors::prober
