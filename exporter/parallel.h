// Per-device fan-out for collectors. Devices are independent (each has its own firmware
// channel), so reading them on a few threads cuts a scrape's wall time on many-HCA nodes; the
// samples are merged back in device order so that the output stays stable.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "exporter/metrics.h"

namespace rdma::exporter {

// Calls fn(i) for every i in [0, n) on up to max_threads threads (the calling thread is one of
// them). fn must be thread-safe across different i. Exceptions propagate after all threads
// have joined (the first index's first).
template <class Fn>
void parallel_for(std::size_t n, unsigned max_threads, Fn&& fn) {
  if (n == 0) return;
  const unsigned threads = std::max(
      1u, std::min<unsigned>({max_threads, std::max(1u, std::thread::hardware_concurrency()), static_cast<unsigned>(n)}));
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Calls fn(item, sink) for every item on up to max_threads threads and appends each item's
// samples to out in item order. fn must be thread-safe across different items. On one thread
// fn writes into out itself: the text is the same, without a sink per item to fill and merge.
template <class Item, class Fn>
void for_each_parallel(const std::vector<Item>& items, unsigned max_threads, MetricSink& out, Fn&& fn) {
  if (max_threads <= 1 || items.size() <= 1) {
    for (const auto& item : items) fn(item, out);
    return;
  }
  std::vector<MetricSink> sinks(items.size());
  parallel_for(items.size(), max_threads, [&](std::size_t i) { fn(items[i], sinks[i]); });
  for (auto& s : sinks) out.append(std::move(s));
}

}  // namespace rdma::exporter
