// A thread with a name (top -H, /proc/<pid>/task/*/comm; bench/prober/run.sh reports CPU per
// thread name).
#pragma once

#include <pthread.h>

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

}  // namespace rdma::collectors::prober
