#include "exporter/scraper.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <stdexcept>
#include <thread>

#include "exporter/exposition.h"

#ifndef RDMA_EXPORTER_VERSION
#define RDMA_EXPORTER_VERSION "0.0.0"
#endif
#ifndef RDMA_EXPORTER_REVISION
#define RDMA_EXPORTER_REVISION "unknown"
#endif

namespace rdma::exporter {

BuildInfo build_info() {
#if defined(__clang__)
  std::string compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  std::string compiler = "gcc " __VERSION__;
#else
  std::string compiler = "unknown";
#endif
  return BuildInfo{RDMA_EXPORTER_VERSION, RDMA_EXPORTER_REVISION, compiler};
}

// A collector, its error accounting, and the state of its current run. Shared with the worker
// thread so that a run that outlives its scrape (a hung firmware read) stays valid.
struct Scraper::Slot {
  std::string name;
  std::unique_ptr<Collector> collector;
  ErrorReporter errors;
  std::atomic<bool> running{false};

  Slot(std::string n, std::unique_ptr<Collector> c) : name(n), collector(std::move(c)), errors(std::move(n)) {}
};

namespace {
// Result of one collector run, shared between the scrape and the worker.
struct Run {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  MetricSink sink;
  double seconds = 0;
};
}  // namespace

Scraper::Scraper(model::Discoverer discoverer, std::vector<Entry> collectors, Duration timeout)
    : discoverer_(std::move(discoverer)), timeout_(timeout) {
  for (auto& e : collectors) slots_.push_back(std::make_shared<Slot>(e.name, std::move(e.collector)));
}

Scraper::~Scraper() { stop(); }

void Scraper::start() {
  for (auto& s : slots_) s->collector->start();
  for (auto& s : slots_)
    for (auto& p : s->collector->http_paths()) {
      if (std::any_of(paths_.begin(), paths_.end(), [&](const HttpPath& q) { return q.path == p.path; }))
        throw std::logic_error("collector " + s->name + ": HTTP path " + p.path + " is served twice");
      paths_.push_back(std::move(p));
    }
}

std::optional<HttpResponse> Scraper::serve_path(std::string_view path, std::string_view query) const {
  for (const auto& p : paths_)
    if (p.path == path) return p.handler(query);
  return std::nullopt;
}

void Scraper::stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& s : slots_) s->collector->stop();
}

std::vector<std::string> Scraper::collector_names() const {
  std::vector<std::string> names;
  for (const auto& s : slots_) names.push_back(s->name);
  return names;
}

MetricSink Scraper::collect() {
  std::lock_guard scrape_lock(scrape_mu_);
  ++scrapes_;
  const auto discovery_start = std::chrono::steady_clock::now();
  auto host = discoverer_.discover();
  const double discovery_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - discovery_start).count();
  for (const auto& issue : host->issues) discovery_errors_.report_read(issue.error, issue.path);

  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::vector<std::shared_ptr<Run>> runs(slots_.size());
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto slot = slots_[i];
    if (slot->running.exchange(true)) {
      // The previous run is still stuck in the kernel: do not pile up threads behind it.
      slot->errors.report("still_running", slot->name, "previous collection has not finished; skipped");
      continue;
    }
    auto run = std::make_shared<Run>();
    runs[i] = run;
    std::thread([slot, run, host] {
      auto t0 = std::chrono::steady_clock::now();
      MetricSink sink;
      bool ok = true;
      try {
        ScrapeContext ctx{*host, slot->errors};
        slot->collector->collect(ctx, sink);
      } catch (const std::exception& e) {
        ok = false;
        slot->errors.report("exception", slot->name, e.what());
      } catch (...) {
        ok = false;
        slot->errors.report("exception", slot->name, "unknown exception");
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      slot->running.store(false);
      std::lock_guard lock(run->mu);
      run->sink = std::move(sink);
      run->ok = ok;
      run->seconds = secs;
      run->done = true;
      run->cv.notify_all();
    }).detach();
  }

  MetricSink out;
  std::vector<std::pair<Slot*, double>> durations;
  std::vector<bool> success;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    auto& run = runs[i];
    Slot* slot = slots_[i].get();
    if (!run) {
      durations.emplace_back(slot, 0.0);
      success.push_back(false);
      continue;
    }
    std::unique_lock lock(run->mu);
    if (!run->cv.wait_until(lock, deadline, [&] { return run->done; })) {
      lock.unlock();
      slot->errors.report("timeout", slot->name, "collector did not finish within the scrape timeout");
      durations.emplace_back(slot, std::chrono::duration<double>(timeout_).count());
      success.push_back(false);
      continue;
    }
    durations.emplace_back(slot, run->seconds);
    success.push_back(run->ok);
    out.append(std::move(run->sink));
  }
  add_self_metrics(out, durations, success, *host);
  out.gauge("rdma_exporter_discovery_duration_seconds", "Time the shared device/port discovery took in this scrape.",
            {}, discovery_seconds);
  return out;
}

void Scraper::add_self_metrics(MetricSink& out, const std::vector<std::pair<Slot*, double>>& durations,
                               const std::vector<bool>& success, const model::HostModel& host) {
  auto bi = build_info();
  out.info("rdma_exporter_build_info", "Build information of rdma_exporter; the value is always 1.",
           {{"version", bi.version}, {"revision", bi.revision}, {"compiler", bi.compiler}});
  for (std::size_t i = 0; i < durations.size(); ++i) {
    Slot* slot = durations[i].first;
    out.gauge("rdma_exporter_collector_scrape_duration_seconds", "Time the collector took in this scrape.",
              {{"collector", slot->name}}, durations[i].second);
    out.gauge("rdma_exporter_collector_success",
              "1 when the collector finished within the timeout without failing, else 0.",
              {{"collector", slot->name}}, success[i] ? 1.0 : 0.0);
    for (const auto& [reason, n] : slot->errors.counts())
      out.counter("rdma_exporter_collector_errors_total",
                  "Errors met by a collector (unreadable files, vanished devices, timeouts), by reason.",
                  {{"collector", slot->name}, {"reason", reason}}, n);
  }
  for (const auto& [reason, n] : discovery_errors_.counts())
    out.counter("rdma_exporter_discovery_errors_total", "Errors while discovering RDMA devices and ports.",
                {{"reason", reason}}, n);
  out.gauge_u64("rdma_exporter_devices", "RDMA devices discovered in this scrape (after include/exclude filters).", {},
                host.devices.size());
  out.gauge_u64("rdma_exporter_devices_excluded", "RDMA devices skipped by the device include/exclude filters.", {},
                host.excluded.size());
  out.counter("rdma_exporter_scrapes_total", "Collections run since start (concurrent requests share one).", {},
              scrapes_.load());
  if (self_metrics_hook_) self_metrics_hook_(out);
}

std::shared_ptr<const std::string> Scraper::scrape_text() {
  std::unique_lock lock(flight_mu_);
  if (auto joined = flight_) {
    flight_cv_.wait(lock, [&] { return joined->done; });
    // Waiters fail the way the collection did.
    if (joined->error) std::rethrow_exception(joined->error);
    return joined->text;
  }
  auto flight = std::make_shared<Flight>();
  flight_ = flight;
  lock.unlock();
  std::shared_ptr<const std::string> text;
  std::exception_ptr error;
  try {
    auto sink = collect();
    auto rendered = std::make_shared<std::string>();
    rendered->reserve(64 * 1024);
    write_text(sink, *rendered);
    text = std::move(rendered);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  flight->text = text;
  flight->error = error;
  flight->done = true;
  flight_.reset();  // the next request starts a new collection
  flight_cv_.notify_all();
  if (error) std::rethrow_exception(error);
  return text;
}

}  // namespace rdma::exporter
