// One scrape: discover the host once, run every enabled collector on its own worker thread
// under the scrape timeout, join their samples and add the self-metrics. A collector that
// throws or overruns is reported as failed; the scrape always answers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
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

class Scraper {
 public:
  struct Entry {
    std::string name;
    std::unique_ptr<Collector> collector;
  };
  Scraper(model::Discoverer discoverer, std::vector<Entry> collectors, Duration timeout);
  ~Scraper();

  // Collects everything and returns the families (self-metrics included).
  MetricSink collect();
  // Collects and renders the text format. Requests that arrive while a collection is running
  // wait for it and share its text (single flight): 100 concurrent scrapers cost one
  // collection, and firmware-backed files are never read by two scrapes at once.
  std::shared_ptr<const std::string> scrape_text();

  void start();  // starts background collectors and gathers their extra HTTP paths
  // The response of the collector that serves `path`, or nullopt when none does.
  std::optional<HttpResponse> serve_path(std::string_view path, std::string_view query) const;
  void stop();   // stops them; idempotent
  std::vector<std::string> collector_names() const;
  // Extra self-metrics appended to every scrape by the daemon (config reloads, HTTP rejections).
  // Set before the first scrape; called under the scrape lock.
  void set_self_metrics_hook(std::function<void(MetricSink&)> hook) { self_metrics_hook_ = std::move(hook); }

 private:
  struct Slot;
  void add_self_metrics(MetricSink& out, const std::vector<std::pair<Slot*, double>>& durations,
                        const std::vector<bool>& success, const model::HostModel& host);

  model::Discoverer discoverer_;
  std::vector<std::shared_ptr<Slot>> slots_;
  Duration timeout_;
  std::mutex scrape_mu_;  // one collection at a time: firmware-backed reads are not hammered
  ErrorReporter discovery_errors_{"discovery"};
  std::atomic<std::uint64_t> scrapes_{0};
  bool stopped_ = false;
  std::function<void(MetricSink&)> self_metrics_hook_;
  std::vector<HttpPath> paths_;  // set by start(), read-only afterwards

  // The collection running now, if any; its text lives only as long as someone holds it.
  struct Flight {
    bool done = false;
    std::shared_ptr<const std::string> text;
    std::exception_ptr error;
  };
  std::mutex flight_mu_;
  std::condition_variable flight_cv_;
  std::shared_ptr<Flight> flight_;
};

}  // namespace rdma::exporter
