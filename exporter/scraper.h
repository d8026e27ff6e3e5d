// One scrape: discover the host once, run every enabled collector on its own long-lived worker
// thread under the scrape timeout, join their samples and add the self-metrics. A collector that
// throws or overruns is reported as failed; the scrape always answers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "exporter/collector.h"
#include "exporter/error_reporter.h"
#include "exporter/metrics.h"
#include "sources/model/host_model.h"

namespace rdma::exporter {

struct BuildInfo {
  std::string version;
  std::string revision;
  std::string compiler;
};
BuildInfo build_info();

// What a reload does with each collector: the running ones whose effective settings are equal
// keep running untouched; the others restart (old instance stopped, then the new one started),
// start, or stop. Pure, so that the decision is tested apart from any collector.
struct ReloadPlan {
  std::vector<std::string> keep, restart, start, stop;
};
struct NamedSettings {
  std::string name;
  std::string settings;  // the collector's effective settings, rendered (see effective_settings in app.cpp)
};
ReloadPlan plan_reload(const std::vector<NamedSettings>& running, const std::vector<NamedSettings>& wanted);

class Scraper {
 public:
  struct Entry {
    std::string name;
    std::string settings;
    std::function<std::unique_ptr<Collector>()> create;  // throws ConfigError
  };
  // One configuration: the discovery, the enabled collectors (in order), the scrape timeout.
  struct Config {
    std::shared_ptr<const model::Discoverer> discoverer;
    std::vector<Entry> collectors;
    Duration timeout{};
  };
  // Creates every collector; throws ConfigError.
  explicit Scraper(Config config);
  ~Scraper();

  // Collects everything and returns the families (self-metrics included). Collectors get the
  // scrape timeout, or client_timeout (what the scraper said it waits) when that is shorter.
  MetricSink collect(std::optional<Duration> client_timeout = std::nullopt);
  // Collects and renders the text format. Requests that arrive while a collection is running
  // wait for it and share its text (single flight): 100 concurrent scrapers cost one
  // collection, and firmware-backed files are never read by two scrapes at once. The collection
  // runs under the timeout of the request that started it; one that joins it waits for that
  // collection whatever its own timeout (scrapers of one target send the same header).
  std::shared_ptr<const std::string> scrape_text(std::optional<Duration> client_timeout = std::nullopt);

  // "name: why" for each collector that failed to start (it then runs as if never started).
  using StartFailures = std::vector<std::string>;
  StartFailures start();  // starts background collectors
  void stop();            // stops them; idempotent

  // Switches to another configuration (SIGHUP) as plan_reload() decides. New instances are
  // created first, then `before_switch` runs (the daemon applies the web config there); an
  // exception from either leaves everything as it was and propagates. Then the old instances of
  // the changed and removed collectors stop, and only then the new ones start, so a port the old
  // one listened on is free. When any new one fails to start, the reload is undone: the new
  // ones stop, the stopped old ones start again, and the previous configuration (discovery,
  // timeout, collector set) stays. The scrapes in between use the previous configuration.
  struct ReloadResult {
    ReloadPlan plan;
    StartFailures failures;          // empty: the reload applied
    StartFailures restore_failures;  // old instances that did not start again (they are off)
  };
  ReloadResult reload(Config next, const std::function<void()>& before_switch = {});

  // The response of the running collector that serves `path` (the first in name order), or nullopt
  // when none does. Asked at each request, so that it follows reloads.
  std::optional<HttpResponse> serve_path(std::string_view path, std::string_view query) const;
  std::vector<std::string> collector_names() const;
  // Extra self-metrics appended to every scrape by the daemon (config reloads, HTTP rejections).
  // Set before the first scrape; called under the scrape lock.
  void set_self_metrics_hook(std::function<void(MetricSink&)> hook) { self_metrics_hook_ = std::move(hook); }

 private:
  struct Slot;
  using Slots = std::vector<std::shared_ptr<Slot>>;
  void add_self_metrics(MetricSink& out, Duration timeout, const std::vector<std::pair<Slot*, double>>& durations,
                        const std::vector<bool>& success, const model::HostModel& host);
  static StartFailures start_slots(const Slots& slots);

  // The configuration in use; a collection takes a copy when it begins, a reload swaps it.
  struct Active {
    std::shared_ptr<const model::Discoverer> discoverer;
    Slots slots;
    Duration timeout{};
  };
  Active active() const;
  mutable std::mutex active_mu_;
  Active active_;

  std::mutex scrape_mu_;  // one collection at a time: firmware-backed reads are not hammered
  std::mutex reload_mu_;  // start, stop and reload, one at a time
  ErrorReporter discovery_errors_{"discovery"};
  std::atomic<std::uint64_t> scrapes_{0};
  bool stopped_ = false;
  std::function<void(MetricSink&)> self_metrics_hook_;

  // The collection running now, if any; its text lives only as long as someone holds it.
  struct Flight {
    bool done = false;
    std::shared_ptr<const std::string> text;
    std::exception_ptr error;
  };
  std::mutex flight_mu_;
  std::condition_variable flight_cv_;
  std::shared_ptr<Flight> flight_;
  // The last text's length: the next is reserved a little larger, so that it is written without
  // regrowing (copying, and faulting in fresh pages for, the text once or twice a scrape).
  std::atomic<std::size_t> last_text_size_{0};
};

}  // namespace rdma::exporter
