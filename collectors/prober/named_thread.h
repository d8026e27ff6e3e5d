// A thread with a name (top -H, /proc/<pid>/task/*/comm; bench/prober/run.sh reports CPU per
// thread name), and the calling thread's CPU time (rdma_prober_cpu_seconds_total by thread).
#pragma once

#include <pthread.h>
#include <time.h>

#include <thread>
#include <utility>

namespace rdma::collectors::prober {

// name must outlive the thread's start (a string literal).
template <class F>
std::thread named_thread(const char* name, F fn) {
  return std::thread([name, fn = std::move(fn)]() mutable {
    pthread_setname_np(pthread_self(), name);
    fn();
  });
}

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace rdma::collectors::prober
