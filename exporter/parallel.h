// Per-device fan-out for collectors. Devices are independent (each has its own firmware
// channel), so reading them on a few threads cuts a scrape's wall time on many-HCA nodes; the
// samples are merged back in device order so that the output stays stable.
#pragma once

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "exporter/metrics.h"

namespace rdma::exporter {

// Calls fn(item, sink) for every item on up to max_threads threads (the calling thread is one
// of them) and appends each item's samples to out in item order. fn must be thread-safe
// across different items. Exceptions propagate after all threads have joined.
template <class Item, class Fn>
void for_each_parallel(const std::vector<Item>& items, unsigned max_threads, MetricSink& out, Fn&& fn) {
  if (items.empty()) return;
  const unsigned threads =
      std::max(1u, std::min<unsigned>({max_threads, std::max(1u, std::thread::hardware_concurrency()),
                                       static_cast<unsigned>(items.size())}));
  std::vector<MetricSink> sinks(items.size());
  std::vector<std::exception_ptr> errors(items.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < items.size();) {
      try {
        fn(items[i], sinks[i]);
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
  for (auto& s : sinks) out.append(std::move(s));
}

}  // namespace rdma::exporter
