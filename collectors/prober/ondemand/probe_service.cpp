#include "collectors/prober/ondemand/probe_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "collectors/prober/engine/config.h"
#include "exporter/exposition.h"
#include "exporter/query.h"

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

// `host` is numeric or a name the config gave (target_host): only the latter is resolved.
std::string numeric_target(const std::string& host, std::string& error) {
  if (parse_cidr(host) && host.find('/') == std::string::npos) return host;
  auto addresses = resolve_all(host, error);
  if (addresses.empty()) return "";
  for (const auto& a : addresses)
    if (a.find(':') == std::string::npos) return a;  // IPv4 first, as the prober's peers
  return addresses.front();
}

// Local session memory held by one probe, given back when it ends.
struct MemoryLease {
  std::size_t bytes;
  bool held;
  explicit MemoryLease(std::size_t b) : bytes(b), held(SessionBudget::process().reserve(b)) {}
  ~MemoryLease() {
    if (held) SessionBudget::process().release(bytes);
  }
};

exporter::HttpResponse refused(const std::string& why) {
  return {403, "text/plain; charset=utf-8", "probe refused: " + why + "\n"};
}
}  // namespace

exporter::HttpResponse ProbeService::handle(std::string_view query, const exporter::RequestIdentity& who,
                                            std::optional<std::chrono::milliseconds> client_timeout) {
  const auto t0 = Clock::now();
  auto& counts = ProbeRequestCounts::process();
  ProbeResult r;
  const ProbeModule* module = nullptr;
  std::string error;
  auto q = parse_probe_query(query, error);
  if (q)
    if (auto it = modules_.find(q->module); it != modules_.end()) module = &it->second;
  const std::string module_label = module ? module->name : "";
  // Before anything reaches the network: an anonymous caller is refused unless the config says
  // otherwise (docs/probe.md, "Access"). Not logged above debug: a stranger could flood the log.
  const bool authenticated = who.authenticated();
  if (auto refusal = exporter::refuse_unauthenticated(who, access_.allow_unauthenticated, "probe",
                                                      "collectors.prober.probe_allow_unauthenticated")) {
    counts.add(module_label, "unauthenticated");
    spdlog::debug("probe: refused an unauthenticated request");
    return std::move(*refusal);
  }
  // A request that cannot run is 400 with its reason (exporter/query.h, as blackbox_exporter);
  // one that ran and failed is 200 with probe_success 0.
  if (!q) {
    spdlog::warn("probe: bad request: {}", error);
    counts.add("", "bad_request");
    return exporter::bad_request(error);
  }
  if (!module) {
    spdlog::warn("probe: unknown module `{}`", q->module);
    counts.add("", "unknown_module");
    return exporter::bad_request("unknown module `" + q->module + "` (collectors.prober.probe_modules)");
  }
  const auto hp = split_target(q->target, default_port_);
  if (!hp) {
    spdlog::warn("probe {}: bad target `{}`", module->name, q->target);
    counts.add("", "bad_request");
    return exporter::bad_request("target `" + q->target + "` is not host, host:port or [v6 address]:port");
  }
  // A name is looked up only when the prober's config names it: refused here otherwise, before
  // any resolver sees it (an anonymous caller must not learn what this node resolves).
  const auto host = target_host(access_, hp->host);
  if (!host) {
    counts.add(module_label, "target_not_allowed");
    spdlog::debug("probe {}: refused target name `{}` (not a static peer's name or address)", module->name, hp->host);
    return refused("target name is not a peer's name or address in the prober's config (collectors.prober.peers); "
                   "give its address");
  }
  ProbeTarget t;
  if (!(t.address = numeric_target(*host, error)).empty()) {
    t.tcp_port = hp->port, t.device = q->device, t.port = q->port;
    bool known = false;
    {
      std::lock_guard lock(mu_);
      known = target_allowed(access_, known_, t.address, t.tcp_port);
    }
    if (!known) {
      counts.add(module_label, "target_not_allowed");
      spdlog::debug("probe {}: refused target {}:{} (not a known peer, nor in probe_target_cidrs at a probe_target_ports port)",
                    module->name, t.address, t.tcp_port);
      return refused("target is neither a known peer of the prober nor in collectors.prober.probe_target_cidrs at one of "
                     "probe_target_ports");
    }
    // The scraper gives up after its timeout header: the probe (handshakes included) ends by then
    // and gives the port back, so that the next scrape does not meet `busy`.
    auto budget = module->timeout;
    if (client_timeout) budget = std::min(budget, *client_timeout);
    if (module->duration.count() && budget <= module->duration) {
      r.reason = "scrape_timeout_too_short";
      spdlog::warn("probe {}: the scrape timeout ({} ms less the offset) is not longer than the module's duration ({} ms)",
                   module->name, budget.count(), module->duration.count());
    } else {
      r = probe(*module, *q, t, t0 + budget);
    }
    counts.add(module->name, r.success                    ? "success"
                             : r.reason == "busy"          ? "busy"
                             : r.reason == "memory_budget" ? "over_budget"
                                                           : "failure");
    r.reason = visible_reason(r.reason, r.target_failure, authenticated);
  } else {
    r.reason = "unresolvable_target";  // a configured peer's name (target_host): worth a warning, to those who may ask
    spdlog::log(authenticated ? spdlog::level::warn : spdlog::level::debug, "probe {}: cannot resolve target `{}`{}", module->name,
                q->target, error.empty() ? "" : ": " + error);
    counts.add(module->name, "failure");
  }
  r.duration_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  exporter::MetricSink sink;
  render_probe(module, r, sink);
  exporter::HttpResponse resp;
  resp.content_type = std::string(exporter::kTextContentType);
  exporter::write_text(sink, resp.body);
  return resp;
}

void ProbeService::set_known_peers(PeerEndpoints peers) {
  std::lock_guard lock(mu_);
  known_ = std::move(peers);
}

ProbeResult ProbeService::probe(const ProbeModule& m, const ProbeQuery& q, const ProbeTarget& t, Clock::time_point deadline) {
  ProbeResult r;
  MemoryLease memory(m.size);  // the session's local buffer
  if (!memory.held) {
    r.reason = "memory_budget";
    spdlog::warn("probe {} to {}: the probes running now hold the node's session memory ({} MiB)", m.name, q.target,
                 ProbeLimits::kLocalSessionBytes >> 20);
    return r;
  }
  auto session = ProbeSession::open(m, t, session_, r.reason);
  if (!session) {
    spdlog::warn("probe {} to {}: {}{}", m.name, q.target, r.reason == "port_not_active" ? "local port not ACTIVE" : "no usable local port",
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

void ProbeService::write_metrics(exporter::MetricSink& out) const {
  const char* help = "Requests to /probe by module and result: success, failure, busy (the port ran another probe), "
                     "over_budget (the node's probe session memory was in use), unauthenticated and target_not_allowed "
                     "(refused with 403), unknown_module, bad_request (module empty for the last two, and for refusals of "
                     "an unknown module). Kept across reloads.";
  std::map<std::pair<std::string, std::string>, std::uint64_t> all;
  for (const auto& [name, m] : modules_)
    for (const char* result : {"success", "failure", "busy"}) all[{name, result}] = 0;
  for (const auto& [k, n] : ProbeRequestCounts::process().snapshot()) all[k] = n;
  for (const auto& [k, n] : all) out.counter("rdma_probe_requests_total", help, {{"module", k.first}, {"result", k.second}}, n);
}

}  // namespace rdma::collectors::prober
