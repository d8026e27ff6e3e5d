#include "collectors/prober/ondemand/probe_module.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "collectors/prober/engine/config.h"
#include "exporter/options.h"
#include "exporter/query.h"
#include "exporter/yaml_util.h"
#include "sources/model/host_model.h"
#include "sources/sysfs/infiniband_class.h"

namespace rdma::collectors::prober {

using exporter::ConfigError;

std::string_view probe_kind_label(ProbeKind k) {
  return k == ProbeKind::kWriteBandwidth ? "write_bw" : "write_lat";
}

namespace {
std::uint64_t bounded(const YAML::Node& v, const std::string& at, const std::string& key, std::uint64_t lo, std::uint64_t hi) {
  std::int64_t x = 0;
  try {
    x = v.as<std::int64_t>();
  } catch (const std::exception&) {
    throw ConfigError(at + ": " + key + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }
  if (x < 0 || static_cast<std::uint64_t>(x) < lo || static_cast<std::uint64_t>(x) > hi)
    throw ConfigError(at + ": " + key + " = " + std::to_string(x) + " is outside " + std::to_string(lo) + ".." +
                      std::to_string(hi));
  return static_cast<std::uint64_t>(x);
}

std::chrono::milliseconds bounded_duration(const YAML::Node& v, const std::string& at, const std::string& key,
                                           std::chrono::milliseconds hi) {
  auto d = exporter::parse_duration(v.as<std::string>(""));
  if (!d || d->count() <= 0 || *d > hi)
    throw ConfigError(at + ": " + key + " must be a duration from 1ms to " + std::to_string(hi.count() / 1000) + "s (e.g. 5s)");
  return *d;
}

bool valid_module_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 &&
         std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}
}  // namespace

std::map<std::string, ProbeModule> parse_probe_modules(const YAML::Node& node, const std::string& origin) {
  std::map<std::string, ProbeModule> out;
  if (!node || node.IsNull()) return out;
  const std::string key = "collectors.prober.probe_modules";
  if (!node.IsMap()) throw ConfigError(where(origin, node) + ": " + key + " must be a map of module name -> settings");
  if (node.size() > ProbeLimits::kMaxModules)
    throw ConfigError(where(origin, node) + ": " + key + " has more than " + std::to_string(ProbeLimits::kMaxModules) + " modules");
  for (const auto& kv : node) {
    ProbeModule m;
    m.name = kv.first.as<std::string>("");
    const std::string mkey = key + "." + m.name;
    if (!valid_module_name(m.name))
      throw ConfigError(where(origin, kv.first) + ": " + key + ": module name `" + m.name +
                        "` must be 1-64 letters, digits, '_' or '-'");
    const YAML::Node& body = kv.second;
    if (!body.IsMap()) throw ConfigError(where(origin, body) + ": " + mkey + " must be a map with at least `kind`");
    if (auto u = exporter::unknown_key(body, {"kind", "size", "qps", "iterations", "duration", "tx_depth", "timeout",
                                              "traffic_class", "service_level"}))
      throw ConfigError(where(origin, *u) + ": unknown key `" + u->as<std::string>("") + "` in " + mkey);
    bool have_kind = false, have_qps = false, have_depth = false, have_timeout = false;
    for (const auto& f : body) {
      const auto k = f.first.as<std::string>("");
      const std::string at = where(origin, f.second), fkey = mkey + "." + k;
      if (k == "kind") {
        const auto v = f.second.as<std::string>("");
        if (v == "write_bw") m.kind = ProbeKind::kWriteBandwidth;
        else if (v == "write_lat") m.kind = ProbeKind::kWriteLatency;
        else throw ConfigError(at + ": " + fkey + " must be write_bw or write_lat, not `" + v + "`");
        have_kind = true;
      } else if (k == "size") {
        m.size = static_cast<std::uint32_t>(bounded(f.second, at, fkey, 1, ProbeLimits::kMaxSize));
      } else if (k == "qps") {
        m.qps = static_cast<std::uint32_t>(bounded(f.second, at, fkey, 1, ProbeLimits::kMaxQps));
        have_qps = true;
      } else if (k == "iterations") {
        m.iterations = bounded(f.second, at, fkey, 1, ProbeLimits::kMaxIterations);
      } else if (k == "duration") {
        m.duration = bounded_duration(f.second, at, fkey, ProbeLimits::kMaxDuration);
      } else if (k == "tx_depth") {
        m.tx_depth = static_cast<std::uint32_t>(bounded(f.second, at, fkey, 1, ProbeLimits::kMaxTxDepth));
        have_depth = true;
      } else if (k == "timeout") {
        m.timeout = bounded_duration(f.second, at, fkey, ProbeLimits::kMaxTimeout);
        have_timeout = true;
      } else if (k == "traffic_class") {
        m.traffic_class = static_cast<std::uint8_t>(bounded(f.second, at, fkey, 0, 255));
      } else if (k == "service_level") {
        m.service_level = static_cast<std::uint8_t>(bounded(f.second, at, fkey, 0, 15));
      }
    }
    const std::string at = where(origin, body);
    if (!have_kind) throw ConfigError(at + ": " + mkey + ".kind is required (write_bw or write_lat)");
    if ((m.iterations == 0) == (m.duration.count() == 0))
      throw ConfigError(at + ": " + mkey + " needs exactly one of `iterations` and `duration`");
    if (m.kind == ProbeKind::kWriteLatency) {
      if ((have_qps && m.qps != 1) || (have_depth && m.tx_depth != 1))
        throw ConfigError(at + ": " + mkey + ": write_lat runs one write at a time on one QP (qps and tx_depth must be 1)");
      m.qps = 1, m.tx_depth = 1;
      if (m.iterations > ProbeLimits::kMaxLatencyIterations)
        throw ConfigError(at + ": " + mkey + ".iterations: write_lat allows at most " +
                          std::to_string(ProbeLimits::kMaxLatencyIterations));
      if (m.duration.count())
        throw ConfigError(at + ": " + mkey + ": write_lat takes `iterations`, not `duration`");
    }
    if (std::size_t{m.size} * m.qps > ProbeLimits::kMaxSessionBytes)
      throw ConfigError(at + ": " + mkey + ": size x qps = " + std::to_string(std::size_t{m.size} * m.qps) +
                        " bytes is more than the " + std::to_string(ProbeLimits::kMaxSessionBytes >> 20) +
                        " MiB a probe may ask its target's responder for (docs/probe.md, \"Memory\")");
    if (!have_timeout) m.timeout = std::min(ProbeLimits::kMaxTimeout, std::max(m.timeout, m.duration + std::chrono::seconds(10)));
    if (m.duration.count() && m.timeout <= m.duration)
      throw ConfigError(at + ": " + mkey + ".timeout must be longer than its duration");
    out.emplace(m.name, std::move(m));
  }
  return out;
}

namespace {
bool printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) > 0x20 && c != 0x7f; });
}
}  // namespace

std::optional<ProbeQuery> parse_probe_query(std::string_view query, std::string& error) {
  // The one policy of every extra path (exporter/query.h): unknown or repeated parameters are
  // a bad request.
  auto params = exporter::parse_query(query, {"module", "target", "device", "port"}, error);
  if (!params) return std::nullopt;
  for (const auto& [name, value] : params->all())
    if (value.size() > 255 || !printable(value)) return error = "bad value of `" + name + "`", std::nullopt;
  ProbeQuery q;
  if (auto* v = params->get("module")) q.module = *v;
  if (auto* v = params->get("target")) q.target = *v;
  if (auto* v = params->get("device")) q.device = *v;
  if (auto* v = params->get("port")) {
    const auto port = exporter::query_number(*v, 1, 255);
    if (!port) return error = "port must be a port number from 1 to 255", std::nullopt;
    q.port = static_cast<std::uint32_t>(*port);
  }
  if (q.module.empty()) return error = "parameter `module` is missing", std::nullopt;
  if (q.target.empty()) return error = "parameter `target` is missing", std::nullopt;
  return q;
}

std::optional<HostAndPort> split_target(std::string_view t, std::uint16_t default_port) {
  HostAndPort out{"", default_port};
  std::string_view port;
  if (!t.empty() && t.front() == '[') {
    const auto close = t.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = std::string(t.substr(1, close - 1));
    const auto rest = t.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else if (std::count(t.begin(), t.end(), ':') == 1) {
    const auto colon = t.find(':');
    out.host = std::string(t.substr(0, colon));
    port = t.substr(colon + 1);
    if (port.empty()) return std::nullopt;
  } else {
    out.host = std::string(t);  // a name, an IPv4 address, or a bare IPv6 address
  }
  if (out.host.empty()) return std::nullopt;
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    const int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) return std::nullopt;
    out.port = static_cast<std::uint16_t>(p);
  }
  return out;
}

PortCounters read_port_counters(const std::string& sysfs_root, const std::string& device, std::uint32_t port) {
  PortCounters out;
  const auto host = model::Discoverer({sysfs_root, "", ""}).discover();  // held: the loop reads into it
  for (const auto& d : host->devices) {
    if (d.name != device) continue;
    for (const auto& p : d.ports) {
      if (p.number != port) continue;
      for (const char* source : {"counters", "hw_counters"}) {
        auto dir = sysfs::read_counter_dir(p.path + "/" + source);
        if (!dir) continue;
        for (const auto& c : dir.value)
          if (c.value) out[{source, c.name}] = c.value.value;
      }
    }
  }
  return out;
}

std::vector<CounterDelta> counters_moved(const PortCounters& before, const PortCounters& after) {
  std::vector<CounterDelta> out;
  for (const auto& [key, v] : after) {
    auto b = before.find(key);
    if (b != before.end() && v > b->second) out.push_back({key.first, key.second, v - b->second});
  }
  return out;
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

double peak_bandwidth(const std::vector<std::uint64_t>& bytes_per_window, double window, double total_seconds) {
  if (window <= 0) return 0;
  const auto full = static_cast<std::size_t>(std::floor(total_seconds / window));
  std::uint64_t best = 0;
  for (std::size_t i = 0; i < std::min(full, bytes_per_window.size()); ++i) best = std::max(best, bytes_per_window[i]);
  return static_cast<double>(best) / window;
}

void render_probe(const ProbeModule* module, const ProbeResult& r, exporter::MetricSink& out) {
  out.gauge("probe_success", "1 when the probe ran to the end without an error, else 0 (the reason is in rdma_probe_failure_info and the log).",
            {}, r.success ? 1 : 0);
  out.gauge("probe_duration_seconds", "Time the probe took, handshakes and setup included.", {}, r.duration_seconds);
  if (!r.success)
    out.info("rdma_probe_failure_info", "Why the probe failed (see docs/probe.md for the reasons); only on failure.",
             {{"reason", r.reason}});
  if (!module || r.device.empty()) return;
  out.info("rdma_probe_info", "The module run and the local port used; value 1.",
           {{"module", module->name}, {"kind", std::string(probe_kind_label(module->kind))}, {"device", r.device},
            {"port", std::to_string(r.port)}, {"peer", r.peer}});
  out.gauge_u64("rdma_probe_message_size_bytes", "Bytes per RDMA WRITE (the module's size).", {}, module->size);
  out.gauge_u64("rdma_probe_qps", "Queue pairs the probe used.", {}, module->qps);
  out.gauge_u64("rdma_probe_writes", "RDMA WRITEs completed successfully during the probe.", {}, r.writes);
  out.gauge_u64("rdma_probe_written_bytes", "Bytes written by the completed RDMA WRITEs.", {}, r.bytes);
  if (module->kind == ProbeKind::kWriteBandwidth) {
    out.gauge("rdma_probe_bandwidth_bytes_per_second",
              "Average RDMA WRITE bandwidth: bytes completed over the time from the first post to the last completion.", {},
              r.bandwidth);
    out.gauge("rdma_probe_peak_bandwidth_bytes_per_second", "Highest bandwidth over the full 100 ms windows of the run (0 if shorter).",
              {}, r.peak_bandwidth);
  } else if (!r.rtts.empty()) {
    // `percentile`, not `quantile`: that label belongs to summaries (promtool), and these are gauges.
    for (auto [label, q] : {std::pair{"0", 0.0}, {"50", 0.5}, {"90", 0.9}, {"99", 0.99}, {"99.9", 0.999}, {"100", 1.0}})
      out.gauge("rdma_probe_rtt_seconds",
                "Round trip of a signaled RDMA WRITE, post to completion, by percentile over the probe's writes (0 = min, 100 = max).",
                {{"percentile", label}}, percentile(r.rtts, q));
  }
  for (const auto& c : r.counters)
    out.gauge_u64("rdma_probe_port_increase",
                  "Increase of a counter of the local port during the probe (only counters that moved): counters/ (PMA) and "
                  "hw_counters/ files by name.",
                  {{"source", c.source}, {"counter", c.name}}, c.delta);
}

}  // namespace rdma::collectors::prober
