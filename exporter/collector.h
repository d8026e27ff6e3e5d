// The collector plugin interface. A collector is one folder under collectors/ with one
// RDMA_REGISTER_COLLECTOR line; the daemon core knows nothing else about it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exporter/error_reporter.h"
#include "exporter/http_handler.h"
#include "exporter/metrics.h"
#include "exporter/options.h"
#include "sources/model/host_model.h"

namespace rdma::verbs {
class DeviceEvents;
}

namespace rdma::exporter {

// What a collector sees during one scrape.
struct ScrapeContext {
  const model::HostModel& host;
  ErrorReporter& errors;  // this collector's error accounting (counted + logged once per cause)
};

class Collector {
 public:
  virtual ~Collector() = default;
  // Reads at scrape time and writes samples. May run on a worker thread; never concurrently
  // with itself. Exceptions are caught by the scraper and counted.
  virtual void collect(const ScrapeContext& ctx, MetricSink& out) = 0;
  // Background collectors (prober, PMA fabric mode) start and stop their loops here.
  // start() throws (std::exception, with a message that says why) when the collector cannot do
  // what it is configured for, e.g. its listening port is taken: the daemon logs it, and a reload
  // counts as failed. A capability the host lacks (no RDMA device) is not a failure: log it, run
  // without it. start() may be called again after stop(): a failed reload restarts the instance
  // it had stopped. A collector whose settings a reload leaves unchanged is neither stopped nor
  // started: its state (histograms, wrap extension, snapshots) carries over.
  virtual void start() {}
  virtual void stop() {}
  // Extra HTTP paths the collector serves (see exporter/http_handler.h), asked at each request to
  // such a path while the collector runs (so that they follow reloads). The core's own paths
  // (telemetry, /, /healthz) take precedence; of two collectors serving one path, the first in
  // name order answers.
  virtual std::vector<HttpPath> http_paths() { return {}; }
};

// A collector's own settings, read from Options under collector.<name>.<key> (key as in
// SettingSpec: "max-peers"). A bad value is a ConfigError from error() or from a checked getter,
// whose message names the key as the user wrote it: the YAML key and its file:line:col
// (collectors.prober.max_peers) or the flag (--collector.prober.max-peers).
class CollectorSettings {
 public:
  CollectorSettings(const Options& options, std::string collector) : options_(options), prefix_("collector." + collector + ".") {}
  std::string string(const std::string& key) const { return options_.get_string(flag(key)); }
  bool boolean(const std::string& key) const { return options_.get_bool(flag(key)); }
  std::int64_t integer(const std::string& key) const { return options_.get_int(flag(key)); }
  Duration duration(const std::string& key) const { return options_.get_duration(flag(key)); }
  std::vector<std::string> list(const std::string& key) const { return options_.get_list(flag(key)); }
  YAML::Node yaml(const std::string& key) const { return options_.get_yaml(flag(key)); }
  // Checked values.
  std::int64_t integer(const std::string& key, std::int64_t min, std::int64_t max) const {
    return options_.get_int(flag(key), min, max);
  }
  Duration positive_duration(const std::string& key) const { return options_.get_positive_duration(flag(key)); }
  // One of `choices`, e.g. choice("verbs", {"auto", "true", "false"}).
  std::string choice(const std::string& key, std::initializer_list<std::string_view> choices) const {
    return options_.get_choice(flag(key), choices);
  }
  // ConfigError "<file:line:col: key 'collectors.<name>.<key>' | flag --collector.<name>.<key>>: <message>".
  ConfigError error(const std::string& key, const std::string& message) const { return options_.error(flag(key), message); }
  // The start of error() messages, for a parser that throws its own.
  std::string where(const std::string& key) const { return options_.where(flag(key)); }
  // "file:line:col", "flag --x" or "default": the base a YAML value's own marks are added to.
  std::string origin(const std::string& key) const { return options_.origin(flag(key)); }
  std::string flag(const std::string& key) const { return prefix_ + key; }

 private:
  const Options& options_;
  std::string prefix_;
};

// Process-wide facts every collector may need.
struct GlobalContext {
  std::string sysfs_root;
  std::string procfs_root;
  // The daemon's one owner of verbs device contexts and their async events (runs for the whole
  // process, across reloads); null in tests that build collectors alone.
  std::shared_ptr<verbs::DeviceEvents> device_events = nullptr;
};

struct SettingSpec {
  std::string key;  // flag form, e.g. "max-peers"; YAML form replaces '-' with '_' (max_peers)
  OptionType type = OptionType::kString;
  std::string default_value;
  std::string help;
  // The value is a path to a file the collector reads when it is created (a secret, a name map):
  // a reload compares the file's content too, so a rotated file restarts the collector. Such a
  // file is read with read_small_file (sources/common/small_file.h), at most kMaxNamesFileBytes.
  bool names_file = false;
};
// The bound of a names_file: a name map of a fabric of a hundred thousand nodes fits many times.
inline constexpr std::size_t kMaxNamesFileBytes = 64u << 20;

struct CollectorDescriptor {
  std::string name;
  std::string help;
  bool enabled_by_default = true;
  std::vector<SettingSpec> settings;
  // Builds the collector; throws ConfigError for bad settings.
  std::function<std::unique_ptr<Collector>(const CollectorSettings&, const GlobalContext&)> create;
};

// All collectors linked into the binary, sorted by name.
std::vector<const CollectorDescriptor*> registered_collectors();

struct CollectorRegistrar {
  explicit CollectorRegistrar(CollectorDescriptor d);
};

}  // namespace rdma::exporter

#define RDMA_EXPORTER_CONCAT2(a, b) a##b
#define RDMA_EXPORTER_CONCAT(a, b) RDMA_EXPORTER_CONCAT2(a, b)
// One line per collector, at namespace scope in its .cpp:
//   RDMA_REGISTER_COLLECTOR({.name = "port", .help = "...", .create = ...});
#define RDMA_REGISTER_COLLECTOR(...)                                                    \
  static const ::rdma::exporter::CollectorRegistrar RDMA_EXPORTER_CONCAT(rdma_collector_registrar_, \
                                                                         __LINE__)(::rdma::exporter::CollectorDescriptor __VA_ARGS__)
