#include "exporter/scraper.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <condition_variable>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include "exporter/exposition.h"
#include "exporter/thread.h"

namespace rdma::exporter {

namespace {
// A collector's own long-lived thread: a scrape hands it the run instead of starting a thread for
// it (clone and exit showed in the profile of bench/port/bench_port.py, a few percent of the
// exporter's CPU). Runs one job at a time; a job stuck in the kernel keeps the thread, and the
// slot's running flag makes the scrapes meanwhile skip the collector, as a thread per run did.
// The thread is detached: it ends after its job once the worker is gone.
class Worker {
 public:
  // Started with every signal blocked: the daemon's signals are the main thread's (sigwait), and
  // a worker may be started before the main thread blocks them (at start and on a reload).
  Worker() : state_(std::make_shared<State>()) {
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    named_thread("collect", [s = state_] { s->loop(); }).detach();
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
    state_->cv.notify_one();
  }
  // The caller makes sure that the previous job has finished (the slot's running flag).
  // Notified after the lock is released: a thread woken while the lock is still held blocks on
  // it at once and is woken a second time (two more futex calls and context switches a scrape,
  // in the profile of bench/port).
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(state_->mu);
      state_->job = std::move(job);
    }
    state_->cv.notify_one();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::function<void()> job;
    bool stop = false;
    void loop() {
      for (;;) {
        std::function<void()> run;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return stop || job; });
          if (!job) return;
          run = std::exchange(job, nullptr);
        }
        run();  // its captures (the slot among them) are released here, before the next wait
      }
    }
  };
  std::shared_ptr<State> state_;
};
}  // namespace

// A collector, its error accounting, and the state of its current run. Shared with the worker
// thread so that a run that outlives its scrape (a hung firmware read) stays valid.
struct Scraper::Slot {
  std::string name;
  std::string settings;
  std::unique_ptr<Collector> collector;
  // Handed on to the instance that replaces this one on a reload: error counts stay monotonic.
  std::shared_ptr<ErrorReporter> errors;
  std::atomic<bool> running{false};
  Worker worker;  // last: its thread is told to end first

  Slot(std::string n, std::string s, std::unique_ptr<Collector> c, std::shared_ptr<ErrorReporter> e)
      : name(std::move(n)), settings(std::move(s)), collector(std::move(c)), errors(std::move(e)) {}
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

bool contains(const std::vector<std::string>& v, const std::string& name) {
  return std::find(v.begin(), v.end(), name) != v.end();
}
}  // namespace

ReloadPlan plan_reload(const std::vector<NamedSettings>& running, const std::vector<NamedSettings>& wanted) {
  ReloadPlan plan;
  auto find = [](const std::vector<NamedSettings>& v, const std::string& name) {
    return std::find_if(v.begin(), v.end(), [&](const NamedSettings& e) { return e.name == name; });
  };
  for (const auto& w : wanted) {
    auto r = find(running, w.name);
    if (r == running.end()) plan.start.push_back(w.name);
    else if (r->settings == w.settings) plan.keep.push_back(w.name);
    else plan.restart.push_back(w.name);
  }
  for (const auto& r : running)
    if (find(wanted, r.name) == wanted.end()) plan.stop.push_back(r.name);
  return plan;
}

Scraper::Scraper(Config config) {
  active_.discoverer = std::move(config.discoverer);
  active_.timeout = config.timeout;
  for (auto& e : config.collectors)
    active_.slots.push_back(
        std::make_shared<Slot>(e.name, e.settings, e.create(), std::make_shared<ErrorReporter>(e.name)));
}

Scraper::~Scraper() { stop(); }

Scraper::Active Scraper::active() const {
  std::lock_guard lock(active_mu_);
  return active_;
}

Scraper::StartFailures Scraper::start_slots(const Slots& slots) {
  StartFailures failures;
  for (const auto& s : slots) {
    try {
      s->collector->start();
    } catch (const std::exception& e) {
      failures.push_back(s->name + ": " + e.what());
    } catch (...) {
      failures.push_back(s->name + ": unknown exception");
    }
  }
  return failures;
}

Scraper::StartFailures Scraper::start() {
  std::lock_guard lock(reload_mu_);
  return start_slots(active().slots);
}

std::optional<HttpResponse> Scraper::serve_path(std::string_view path, std::string_view query) const {
  // The configuration of this moment, held until the handler returns: a reload that replaces the
  // collector meanwhile leaves this instance alive (and stopped) until then.
  const Active cfg = active();
  for (const auto& s : cfg.slots)
    for (auto& p : s->collector->http_paths())
      if (p.path == path) return p.handler(query);
  return std::nullopt;
}

void Scraper::stop() {
  std::lock_guard lock(reload_mu_);
  if (stopped_) return;
  stopped_ = true;
  for (auto& s : active().slots) s->collector->stop();
}

Scraper::ReloadResult Scraper::reload(Config next, const std::function<void()>& before_switch) {
  std::lock_guard lock(reload_mu_);
  const Active current = active();
  std::vector<NamedSettings> running, wanted;
  for (const auto& s : current.slots) running.push_back({s->name, s->settings});
  for (const auto& e : next.collectors) wanted.push_back({e.name, e.settings});
  ReloadResult result;
  result.plan = plan_reload(running, wanted);
  auto running_slot = [&](const std::string& name) -> std::shared_ptr<Slot> {
    for (const auto& s : current.slots)
      if (s->name == name) return s;
    return nullptr;
  };

  // Create first: a collector that rejects its settings leaves everything running as it was.
  Slots slots, fresh, stopped;
  for (auto& e : next.collectors) {
    auto old = running_slot(e.name);
    if (contains(result.plan.keep, e.name)) {
      slots.push_back(old);
      continue;
    }
    auto errors = old ? old->errors : std::make_shared<ErrorReporter>(e.name);
    fresh.push_back(std::make_shared<Slot>(e.name, e.settings, e.create(), std::move(errors)));
    slots.push_back(fresh.back());
  }
  if (before_switch) before_switch();
  for (const auto& s : current.slots) {
    if (contains(result.plan.keep, s->name)) continue;
    s->collector->stop();
    stopped.push_back(s);
  }
  result.failures = start_slots(fresh);
  if (!result.failures.empty()) {
    for (const auto& s : fresh) s->collector->stop();
    result.restore_failures = start_slots(stopped);
    return result;
  }
  std::lock_guard active_lock(active_mu_);
  active_ = Active{std::move(next.discoverer), std::move(slots), next.timeout};
  return result;
}

std::vector<std::string> Scraper::collector_names() const {
  std::vector<std::string> names;
  for (const auto& s : active().slots) names.push_back(s->name);
  return names;
}

MetricSink Scraper::collect(std::optional<Duration> client_timeout) {
  std::lock_guard scrape_lock(scrape_mu_);
  const Active cfg = active();
  const Slots& slots = cfg.slots;
  const Duration timeout = client_timeout ? std::min(cfg.timeout, *client_timeout) : cfg.timeout;
  ++scrapes_;
  const auto discovery_start = std::chrono::steady_clock::now();
  auto host = cfg.discoverer->discover();
  const double discovery_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - discovery_start).count();
  for (const auto& issue : host->issues) discovery_errors_.report_read(issue.error, issue.path);

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::shared_ptr<Run>> runs(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    auto slot = slots[i];
    if (slot->running.exchange(true)) {
      // The previous run is still stuck in the kernel: do not pile up threads behind it.
      slot->errors->report("still_running", slot->name, "previous collection has not finished; skipped");
      continue;
    }
    auto run = std::make_shared<Run>();
    runs[i] = run;
    slot->worker.post([slot, run, host] {
      auto t0 = std::chrono::steady_clock::now();
      MetricSink sink;
      bool ok = true;
      try {
        ScrapeContext ctx{*host, *slot->errors};
        slot->collector->collect(ctx, sink);
      } catch (const std::exception& e) {
        ok = false;
        slot->errors->report("exception", slot->name, e.what());
      } catch (...) {
        ok = false;
        slot->errors->report("exception", slot->name, "unknown exception");
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      slot->running.store(false);
      {
        std::lock_guard lock(run->mu);
        run->sink = std::move(sink);
        run->ok = ok;
        run->seconds = secs;
        run->done = true;
      }
      run->cv.notify_all();  // after the unlock, as in Worker::post; this job's copy keeps run alive
    });
  }

  MetricSink out;
  std::vector<std::pair<Slot*, double>> durations;
  std::vector<bool> success;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    auto& run = runs[i];
    Slot* slot = slots[i].get();
    if (!run) {
      durations.emplace_back(slot, 0.0);
      success.push_back(false);
      continue;
    }
    std::unique_lock lock(run->mu);
    if (!run->cv.wait_until(lock, deadline, [&] { return run->done; })) {
      lock.unlock();
      slot->errors->report("timeout", slot->name, "collector did not finish within the scrape timeout");
      durations.emplace_back(slot, std::chrono::duration<double>(timeout).count());
      success.push_back(false);
      continue;
    }
    durations.emplace_back(slot, run->seconds);
    success.push_back(run->ok);
    out.append(std::move(run->sink));
  }
  add_self_metrics(out, timeout, durations, success, *host);
  out.gauge("rdma_exporter_discovery_duration_seconds", "Time the shared device/port discovery took in this scrape.",
            {}, discovery_seconds);
  return out;
}

void Scraper::add_self_metrics(MetricSink& out, Duration timeout, const std::vector<std::pair<Slot*, double>>& durations,
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
    for (const auto& [reason, n] : slot->errors->counts())
      out.counter("rdma_exporter_collector_errors_total",
                  "Errors met by a collector (unreadable files, vanished devices, timeouts), by reason.",
                  {{"collector", slot->name}, {"reason", reason}}, n);
    for (const auto& [capability, available] : slot->errors->capabilities())
      out.gauge("rdma_exporter_collector_capability",
                "1 when the host offers what a collector can use (umad device, ECN sysfs, PMA counters), 0 when "
                "some port or netdev lacks it. State, not an error: logged once when it goes missing.",
                {{"collector", slot->name}, {"capability", capability}}, available ? 1.0 : 0.0);
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
  out.gauge("rdma_exporter_scrape_timeout_seconds",
            "Time this collection gave the collectors: --scrape.timeout, or the scraper's "
            "X-Prometheus-Scrape-Timeout-Seconds less --web.timeout-offset when shorter.",
            {}, std::chrono::duration<double>(timeout).count());
  if (self_metrics_hook_) self_metrics_hook_(out);
}

std::shared_ptr<const std::string> Scraper::scrape_text(std::optional<Duration> client_timeout) {
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
    auto sink = collect(client_timeout);
    auto rendered = std::make_shared<std::string>();
    const std::size_t last = last_text_size_.load(std::memory_order_relaxed);
    rendered->reserve(std::max<std::size_t>(64 * 1024, last + last / 8));
    write_text(sink, *rendered);
    last_text_size_.store(rendered->size(), std::memory_order_relaxed);
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
