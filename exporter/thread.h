// Background threads of the daemon and its collectors: every one has a name (top -H,
// /proc/<pid>/task/*/comm; bench/prober/run.sh reports CPU per thread name), and the calling
// thread's CPU time (rdma_prober_cpu_seconds_total by thread). Header-only: a collector's
// thread needs nothing else of the core.
#pragma once

#include <pthread.h>
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace rdma::exporter {

// A std::thread running fn under `name` (at most 15 characters: the kernel's limit). name must
// outlive the thread's start (a string literal).
template <class F>
std::thread named_thread(const char* name, F fn) {
  return std::thread([name, fn = std::move(fn)]() mutable {
    pthread_setname_np(pthread_self(), name);
    fn();
  });
}

// What a background loop sleeps on between rounds: wait_for() returns true as soon as stop() is
// called (at once when it already was), false when the time passed, so a stopping daemon never
// waits out a loop's period. reset() arms it again for a loop that can be restarted.
class StopSignal {
 public:
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  void reset() {
    std::lock_guard lock(mu_);
    stopped_ = false;
  }
  bool stopped() const {
    std::lock_guard lock(mu_);
    return stopped_;
  }
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> d) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, d, [this] { return stopped_; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace rdma::exporter
