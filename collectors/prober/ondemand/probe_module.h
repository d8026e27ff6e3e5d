// On-demand probes (/probe, docs/probe.md) without verbs: the modules of the config file, the
// query string, and the rendering of one result as a scrape. Pure functions, unit-tested.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/prober/verbs/probe_limits.h"
#include "exporter/metrics.h"

namespace rdma::collectors::prober {

enum class ProbeKind : std::uint8_t { kWriteBandwidth, kWriteLatency };
std::string_view probe_kind_label(ProbeKind k);  // "write_bw", "write_lat"

// One module of collectors.prober.probe_modules: everything a request may run. A request
// chooses a module, never its sizes: the config bounds what /probe can cost.
struct ProbeModule {
  std::string name;
  ProbeKind kind = ProbeKind::kWriteBandwidth;
  std::uint32_t size = 65536;           // bytes per RDMA WRITE
  std::uint32_t qps = 1;                // queue pairs (write_lat: 1)
  std::uint64_t iterations = 0;         // writes per QP; 0: run for `duration`
  std::chrono::milliseconds duration{0};
  std::uint32_t tx_depth = 128;         // writes outstanding per QP (write_lat: 1)
  std::chrono::milliseconds timeout{30000};  // the whole probe, handshakes included
  std::uint8_t traffic_class = 0;       // IP TOS byte (RoCE v2) / GRH traffic class of the writes
  std::uint8_t service_level = 0;       // InfiniBand SL, 0..15
  bool operator==(const ProbeModule&) const = default;
};

// collectors.prober.probe_modules: a map of module name -> settings. Throws exporter::ConfigError
// naming the YAML key and the file position. A null node: no modules (/probe is off).
std::map<std::string, ProbeModule> parse_probe_modules(const YAML::Node& node, const std::string& origin);

// GET /probe?module=&target=[&device=&port=]
struct ProbeQuery {
  std::string module;
  std::string target;  // host or address, optionally :port ([v6]:port)
  std::string device;  // empty: the first active port of the prober's devices
  std::uint32_t port = 0;
  bool operator==(const ProbeQuery&) const = default;
};
// Percent-decodes the parameters; nullopt and `error` on a missing or malformed one.
std::optional<ProbeQuery> parse_probe_query(std::string_view query, std::string& error);

struct HostAndPort {
  std::string host;
  std::uint16_t port = 0;
};
// "host", "host:9662", "10.0.0.1", "[fe80::1]:9662", "fe80::1" -> host and port (default_port
// when absent). nullopt on an empty host or a bad port.
std::optional<HostAndPort> split_target(std::string_view target, std::uint16_t default_port);

// A counter of the local port that moved during the run.
struct CounterDelta {
  std::string source;  // "counters" (PMA) or "hw_counters"
  std::string name;    // file name
  std::uint64_t delta = 0;
};

// The port's counters/ (PMA) and hw_counters/ files, read through the host model and the sysfs
// source readers: (source, file name) -> value. Unreadable files are left out (a counter that
// cannot be read did not visibly move).
using PortCounters = std::map<std::pair<std::string, std::string>, std::uint64_t>;
PortCounters read_port_counters(const std::string& sysfs_root, const std::string& device, std::uint32_t port);
// The counters that went up between two readings (a counter reset or wrap is not a move).
std::vector<CounterDelta> counters_moved(const PortCounters& before, const PortCounters& after);

struct ProbeResult {
  bool success = false;
  std::string reason;  // failure reason label (bounded set, docs/probe.md); empty on success
  bool target_failure = false;  // the reason is a failure to reach the target's responder (handshake)
  double duration_seconds = 0;
  std::string device;  // local port used (empty when none was chosen)
  std::uint32_t port = 0;
  std::string peer;    // the responder's node name from its accept
  std::uint64_t writes = 0, bytes = 0;  // completed
  double bandwidth = 0, peak_bandwidth = 0;  // bytes per second (write_bw)
  std::vector<double> rtts;                  // seconds, sorted (write_lat)
  std::vector<CounterDelta> counters;
};

// Nearest-rank percentile of sorted values (q in [0, 1]); 0 when empty.
double percentile(const std::vector<double>& sorted, double q);
// Highest bandwidth over the full windows of a run: bytes_per_window[i] were completed in
// [i * window, (i + 1) * window) seconds after the start; the last, partial window (at
// total_seconds) does not count. 0 when the run is shorter than one window.
double peak_bandwidth(const std::vector<std::uint64_t>& bytes_per_window, double window, double total_seconds);

// The scrape /probe answers: probe_success, probe_duration_seconds and rdma_probe_* families.
// `module` is null for an unknown module.
void render_probe(const ProbeModule* module, const ProbeResult& r, exporter::MetricSink& out);

}  // namespace rdma::collectors::prober
