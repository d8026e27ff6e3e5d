#include "collectors/prober/probe_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <set>

#include "collectors/prober/config.h"
#include "exporter/exposition.h"

namespace rdma::collectors::prober {

namespace {
using Clock = std::chrono::steady_clock;

// The local ports running a probe now, process-wide: a reload builds a new collector while an
// old probe may still run.
std::mutex busy_mu;
std::set<std::pair<std::string, std::uint32_t>> busy_ports;

struct PortLease {
  std::pair<std::string, std::uint32_t> key;
  bool held = false;
  explicit PortLease(std::pair<std::string, std::uint32_t> k) : key(std::move(k)) {
    std::lock_guard lock(busy_mu);
    held = busy_ports.insert(key).second;
  }
  ~PortLease() {
    if (!held) return;
    std::lock_guard lock(busy_mu);
    busy_ports.erase(key);
  }
};

std::string numeric_target(const std::string& host, std::string& error) {
  auto addresses = resolve_all(host, error);
  if (addresses.empty()) return "";
  for (const auto& a : addresses)
    if (a.find(':') == std::string::npos) return a;  // IPv4 first, as the prober's peers
  return addresses.front();
}
}  // namespace

exporter::HttpResponse ProbeService::handle(std::string_view query) {
  const auto t0 = Clock::now();
  ProbeResult r;
  const ProbeModule* module = nullptr;
  std::string error;
  auto q = parse_probe_query(query, error);
  if (!q) {
    r.reason = "bad_request";
    spdlog::warn("probe: bad request: {}", error);
    count("", "bad_request");
  } else if (auto it = modules_.find(q->module); it == modules_.end()) {
    r.reason = "unknown_module";
    spdlog::warn("probe: unknown module `{}`", q->module);
    count("", "unknown_module");
  } else {
    module = &it->second;
    r = probe(*module, *q);
    count(module->name, r.success ? "success" : r.reason == "busy" ? "busy" : "failure");
  }
  r.duration_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  exporter::MetricSink sink;
  render_probe(module, r, sink);
  exporter::HttpResponse resp;
  resp.content_type = std::string(exporter::kTextContentType);
  exporter::write_text(sink, resp.body);
  return resp;
}

ProbeResult ProbeService::probe(const ProbeModule& m, const ProbeQuery& q) {
  ProbeResult r;
  const auto deadline = Clock::now() + m.timeout;
  auto hp = split_target(q.target, default_port_);
  std::string error;
  ProbeTarget t;
  if (hp) t.address = numeric_target(hp->host, error);
  if (!hp || t.address.empty()) {
    r.reason = "unresolvable_target";
    spdlog::warn("probe {}: cannot resolve target `{}`{}", m.name, q.target, error.empty() ? "" : ": " + error);
    return r;
  }
  t.tcp_port = hp->port, t.device = q.device, t.port = q.port;
  auto session = ProbeSession::open(m, t, session_, r.reason);
  if (!session) {
    spdlog::warn("probe {} to {}: no usable local port{}", m.name, q.target,
                 q.device.empty() ? "" : " (device " + q.device + (q.port ? " port " + std::to_string(q.port) : "") + ")");
    return r;
  }
  PortLease lease({session->device(), session->port()});
  if (!lease.held) {
    r.reason = "busy", r.device = session->device(), r.port = session->port();
    spdlog::warn("probe {} to {}: {}/{} already runs a probe", m.name, q.target, r.device, r.port);
    return r;
  }
  spdlog::debug("probe {} from {}/{} to {} ({}:{}): started", m.name, session->device(), session->port(), q.target, t.address,
                t.tcp_port);
  const auto before = read_port_counters(sysfs_, session->device(), session->port());
  session->run(deadline, r);
  r.counters = counters_moved(before, read_port_counters(sysfs_, session->device(), session->port()));
  if (!r.success)
    spdlog::warn("probe {} from {}/{} to {} ({}:{}): {}", m.name, r.device, r.port, q.target, t.address, t.tcp_port, r.reason);
  else
    spdlog::info("probe {} from {}/{} to {} ({}): {} writes, {}", m.name, r.device, r.port, q.target, r.peer, r.writes,
                 m.kind == ProbeKind::kWriteBandwidth ? fmt::format("{:.0f} B/s", r.bandwidth)
                                                      : fmt::format("median RTT {:.2f} us", percentile(r.rtts, 0.5) * 1e6));
  return r;
}

void ProbeService::count(const std::string& module, const std::string& result) {
  std::lock_guard lock(mu_);
  ++requests_[{module, result}];
}

void ProbeService::write_metrics(exporter::MetricSink& out) const {
  const char* help = "Requests to /probe by module and result: success, failure, busy (the port ran another probe), "
                     "unknown_module, bad_request (module empty for the last two).";
  std::map<std::pair<std::string, std::string>, std::uint64_t> all;
  for (const auto& [name, m] : modules_)
    for (const char* result : {"success", "failure", "busy"}) all[{name, result}] = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [k, n] : requests_) all[k] = n;
  }
  for (const auto& [k, n] : all) out.counter("rdma_probe_requests_total", help, {{"module", k.first}, {"result", k.second}}, n);
}

}  // namespace rdma::collectors::prober
