#include "collectors/pma/target_guard.h"

#include <algorithm>
#include <thread>

namespace rdma::collectors::pma {

MadBucket::MadBucket(double rate, double min_burst)
    : rate_(rate), burst_(std::max(rate, min_burst)), tokens_(burst_), last_(Clock::now()) {}

void MadBucket::refill(Clock::time_point now) {
  tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

bool MadBucket::take(double n, Clock::time_point deadline) {
  Clock::time_point ready;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    refill(now);
    if (tokens_ >= n) {
      tokens_ -= n;
      return true;
    }
    ready = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((n - tokens_) / rate_));
    if (ready > deadline) return false;
    tokens_ -= n;  // reserved: whoever comes next waits behind this read
  }
  std::this_thread::sleep_until(ready);
  return true;
}

void MadBucket::debit(double n) {
  std::lock_guard lock(mu_);
  refill(Clock::now());
  tokens_ -= n;
}

RouteGate::Admission RouteGate::admit() {
  Admission a;
  a.held = std::unique_lock(computing_, std::try_to_lock);
  if (!a.held.owns_lock()) {
    a.refused = "busy";
    return a;
  }
  // A deadline already past: the token now or not at all (take() never sleeps then).
  if (!bucket_.take(1, MadBucket::Clock::now())) {
    a.held.unlock();
    a.held = {};
    a.refused = "rate_limited";
  }
  return a;
}

void TargetReads::prune(Clock::time_point now) {
  std::erase_if(entries_, [&](const auto& kv) { return kv.second.answer && now - kv.second.done >= ttl_; });
  // Still full (many distinct fresh reads): drop the oldest finished ones; running reads stay.
  while (entries_.size() > max_entries_) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.answer && (oldest == entries_.end() || it->second.done < oldest->second.done)) oldest = it;
    if (oldest == entries_.end()) break;
    entries_.erase(oldest);
  }
}

TargetAnswer TargetReads::get(const std::string& key, const std::function<TargetAnswer()>& read, bool* shared,
                              Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  bool waited = false;
  for (;;) {
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    if (!it->second.answer) {  // read by another request now: wait for its answer, within this one's time
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
        auto again = entries_.find(key);
        if (again == entries_.end() || !again->second.answer) {
          *shared = true;
          return TargetAnswer{503, "another request's read of this target did not finish within this request's time\n",
                              "busy", 0};
        }
      }
      waited = true;
      continue;
    }
    if (waited || Clock::now() - it->second.done < ttl_) {
      *shared = true;
      TargetAnswer a = *it->second.answer;
      a.mads = 0;
      return a;
    }
    entries_.erase(it);
    break;
  }
  *shared = false;
  entries_[key] = Entry{};
  lock.unlock();
  std::shared_ptr<const TargetAnswer> answer;
  try {
    answer = std::make_shared<const TargetAnswer>(read());
  } catch (...) {
    lock.lock();
    entries_.erase(key);
    cv_.notify_all();
    throw;
  }
  lock.lock();
  const auto now = Clock::now();
  entries_[key] = Entry{answer, now};
  prune(now);
  cv_.notify_all();
  return *answer;
}

TargetCounters& target_counters() {
  static TargetCounters counters;  // never destroyed before the collectors that count into it
  return counters;
}

}  // namespace rdma::collectors::pma
