// Background threads of the daemon and its collectors: every one has a name (top -H,
// /proc/<pid>/task/*/comm; bench/prober/run.sh reports CPU per thread name), and the calling
// thread's CPU time (rdma_prober_cpu_seconds_total by thread). Header-only: a collector's
// thread needs nothing else of the core.
#pragma once

#include <pthread.h>
#include <time.h>

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

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace rdma::exporter
