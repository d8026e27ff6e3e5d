#include "collectors/pma/fabric.h"
#include "collectors/pma/fabric_probe_routes.h"

#include <infiniband/ibnetdisc.h>
#include <spdlog/spdlog.h>

#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "collectors/pma/pma_metrics.h"
#include "exporter/collector.h"
#include "exporter/exposition.h"
#include "exporter/text.h"
#include "exporter/thread.h"
#include "sources/common/small_file.h"

namespace rdma::collectors::pma {

using Clock = std::chrono::steady_clock;

LoopCounters& loop_counters() {
  static LoopCounters counters;  // never destroyed before the loops that count into it: process lifetime
  return counters;
}

namespace {
// One change to the process-wide loop counters, under their lock.
template <typename F>
void count_loop(F&& change) {
  LoopCounters& c = loop_counters();
  std::lock_guard lock(c.mu);
  change(c);
}

std::string trim_desc(const char* s) {
  std::string d(s);
  while (!d.empty() && (d.back() == ' ' || d.back() == '\0' || d.back() == '\n')) d.pop_back();
  return d;
}
std::string type_label(int t) {
  switch (t) {
    case IB_NODE_SWITCH: return "switch";
    case IB_NODE_CA: return "ca";
    case IB_NODE_ROUTER: return "router";
    default: return "unknown";
  }
}
}  // namespace

namespace {
// A port's PortInfo as libibnetdisc read it. A switch's external ports leave CapabilityMask
// reserved (IBA 14.2.5.6): it is port 0's, as iblinkinfo takes it (IsExtendedSpeedsSupported).
std::optional<mad::PortInfo> port_info_of(const ibnd_port_t* port) {
  auto pi = mad::decode_port_info(port->info);
  const ibnd_node_t* n = port->node;
  if (pi && n && n->type == IB_NODE_SWITCH && n->ports && n->ports[0] && port->portnum != 0)
    if (auto p0 = mad::decode_port_info(n->ports[0]->info)) pi->capability_mask = p0->capability_mask;
  return pi;
}
}  // namespace

std::unique_ptr<Topology> discover(const FabricOptions& o, const mad::NodeNameMap& names, std::string* error) {
  ibnd_config_t cfg;
  std::memset(&cfg, 0, sizeof cfg);
  cfg.timeout_ms = static_cast<unsigned>(o.query.timeout.count());
  cfg.retries = o.query.retries;
  cfg.max_smps = std::max(2u, std::min(o.query.window, 16u));
  std::string ca = o.ca;
  ibnd_fabric_t* f = ibnd_discover_fabric(ca.empty() ? nullptr : ca.data(), o.port, nullptr, &cfg);
  if (!f) {
    if (error) *error = "ibnd_discover_fabric failed";
    return nullptr;
  }
  auto name_of = [&names](const ibnd_node_t* n) {
    if (const std::string* m = names.find(n->guid)) return *m;
    return trim_desc(n->nodedesc);
  };
  auto topo = std::make_unique<Topology>();
  std::map<std::uint16_t, unsigned> master_sm_lids;  // MasterSMLID -> ports reporting it
  for (ibnd_node_t* n = f->nodes; n; n = n->next) {
    FabricNode node;
    node.guid = n->guid;
    node.guid_label = mad::guid_label(n->guid);
    node.name = name_of(n);
    node.description = trim_desc(n->nodedesc);
    node.type = type_label(n->type);
    const bool sw = n->type == IB_NODE_SWITCH;
    if (sw && n->ports && n->ports[0]) node.lid = n->ports[0]->base_lid;
    for (int p = 1; p <= n->numports && n->ports; ++p) {
      const ibnd_port_t* port = n->ports[p];
      if (!port || !port->remoteport || !port->remoteport->node) continue;  // not cabled
      FabricPort fp;
      fp.number = static_cast<std::uint8_t>(p);
      fp.lid = sw ? node.lid : port->base_lid;  // switch ports share port 0's LID
      if (fp.lid == 0) continue;                // not configured by an SM yet: not addressable
      fp.remote_guid = mad::guid_label(port->remoteport->node->guid);
      fp.remote_name = name_of(port->remoteport->node);
      fp.remote_port = std::to_string(port->remoteport->portnum);
      fp.remote_guid_value = port->remoteport->node->guid;
      fp.info = port_info_of(port);
      fp.remote_info = port_info_of(port->remoteport);
      if (node.lid == 0) node.lid = fp.lid;
      node.ports.push_back(std::move(fp));
    }
    if (sw) node.switch_info = mad::decode_switch_info(n->switchinfo);
    note_sm_ports(n, node.guid_label, node.name, topo->sm_ports, master_sm_lids);
    topo->by_guid.emplace(node.guid, topo->nodes.size());
    topo->nodes.push_back(std::move(node));
  }
  topo->sm_ports = sm_ports_to_poll(std::move(topo->sm_ports), master_sm_lids);
  ibnd_destroy_fabric(f);
  return topo;
}

namespace {
// The series of a fabric node and its ports, the same in the snapshot and in a /pma answer:
// counters labelled `node_guid, port` only (a /pma target leaves node_guid to its target label),
// names in the two _info series joined on them: names are long and would repeat on each of the
// ~22 counter series of every port (12 KB a port with them, under 2 KB without).
void emit_node(const FabricNode& n, const exporter::Labels& node, exporter::MetricSink& out) {
  exporter::Labels l = node;
  l.emplace_back("node_name", n.name);
  l.emplace_back("node_description", n.description);
  l.emplace_back("node_type", n.type);
  out.info("rdma_pma_fabric_node_info",
           "A fabric node: its name (node-name-map, else NodeDescription), NodeDescription and type (switch, ca, router).",
           std::move(l));
}

void emit_fabric_port(const FabricPort& fp, const exporter::Labels& node, const PortReadings* r,
                      exporter::MetricSink& out) {
  exporter::Labels base = node;
  base.emplace_back("port", std::to_string(fp.number));
  exporter::Labels info = base;
  info.emplace_back("remote_guid", fp.remote_guid);
  info.emplace_back("remote_name", fp.remote_name);
  info.emplace_back("remote_port", fp.remote_port);
  out.info("rdma_pma_fabric_port_info", "A cabled fabric port and its far end: node GUID, name and port number.",
           std::move(info));
  if (r) emit_port(*r, "rdma_pma_fabric_port_", base, out, Saturation::kOnlySaturated);
}
}  // namespace

// Up to 4,096 distinct reads cached: a node and port list each (a fabric of thousands of nodes
// scraped by one exporter fits; a client inventing port lists only evicts the oldest).
FabricLoop::FabricLoop(FabricOptions o)
    : o_(std::move(o)), target_reads_(o_.target_cache, 4096), target_bucket_(o_.target_mad_rate, 0) {
  if (!o_.node_name_map.empty()) {
    auto map = read_small_file(o_.node_name_map, exporter::kMaxNamesFileBytes);
    if (map)
      names_ = mad::parse_node_name_map(map.value);
    else
      spdlog::warn("pma fabric: node-name-map {} not read ({}): GUIDs stand for names",
                   o_.node_name_map, map.sys_errno == EFBIG ? "larger than the bound" : reason_label(map.error));
  }
}

FabricLoop::~FabricLoop() { stop(); }

void FabricLoop::start() {
  std::lock_guard lock(run_mu_);
  if (thread_.joinable()) return;
  sleep_.reset();
  // The first MAD port open and discovery run here, before the HTTP server takes scrapes, so that
  // the loop starts from a topology. (The crash once blamed on a scrape racing this discovery was
  // umad2sim delivering late replies to closed ports; see the local-mode client in
  // pma_collector.cpp.)
  try {
    std::string err;
    if (!client()) {
      auto c = mad::MadClient::shared(o_.ca, o_.port, &err);
      std::lock_guard t(topo_mu_);
      client_ = std::move(c);
    }
    if (client()) rediscover(&err);
  } catch (const std::exception& e) {
    spdlog::warn("pma fabric: first discovery failed: {}", e.what());
  }
  thread_ = exporter::named_thread("pma-fabric", [this] { run(); });
}

void FabricLoop::stop() {
  sleep_.stop();
  std::lock_guard lock(run_mu_);
  if (thread_.joinable()) thread_.join();
}

void FabricLoop::run() {
  for (;;) {
    try {
      refresh_once();
    } catch (const std::exception& e) {
      spdlog::warn("pma fabric refresh failed: {}", e.what());
    }
    if (sleep_.wait_for(o_.period)) return;
  }
}

void FabricLoop::publish(std::string text) {
  auto s = std::make_shared<Snapshot>();
  s->text = std::make_shared<const std::string>(std::move(text));
  s->taken = Clock::now();
  std::lock_guard lock(snap_mu_);
  snap_ = std::move(s);
}

std::shared_ptr<const Topology> FabricLoop::topology() const {
  std::lock_guard lock(topo_mu_);
  return topo_;
}

std::shared_ptr<mad::MadClient> FabricLoop::client() const {
  std::lock_guard lock(topo_mu_);
  return client_;
}

void FabricLoop::collect(exporter::MetricSink& out) const {
  {
    TargetCounters& c = target_counters();
    std::lock_guard lock(c.mu);
    for (const auto& [result, count] : c.requests)
      out.counter("rdma_pma_fabric_target_requests_total",
                  "/pma target requests by result (ok, partial, unreachable, rate_limited, busy, bad_request, unknown_target, "
                  "unauthenticated).",
                  {{"result", result}}, count);
    out.counter("rdma_pma_fabric_target_mads_total", "PMA MADs sent for /pma target requests, retries included.", {},
                c.mads);
    for (const auto& [result, count] : c.route_requests)
      out.counter("rdma_pma_fabric_route_requests_total",
                  "/pma/routes and /pma/routes/suspects requests by result (ok, bad_request, no_tables, unauthenticated, "
                  "busy, rate_limited).",
                  {{"result", result}}, count);
  }
  // The prober's links change every window, the tables with the fabric: routed at scrape time.
  if (o_.routes)
    if (const auto t = lft_.tables(); t && t->topology)
      write_probe_routes(*t->topology, *t, *model::ib_probe_links().view(), o_.route_links, out);
  std::shared_ptr<const Snapshot> s;
  {
    std::lock_guard lock(snap_mu_);
    s = snap_;
  }
  if (!s) return;
  out.append_rendered(s->text);
  out.gauge("rdma_pma_fabric_snapshot_age_seconds", "Seconds since the fabric snapshot served here was taken.", {},
            std::chrono::duration<double>(Clock::now() - s->taken).count());
  out.gauge("rdma_pma_fabric_refresh_interval_seconds",
            "The fabric loop's period between refreshes (fabric-period): an age of several of these means it is stuck.",
            {}, std::chrono::duration<double>(o_.period).count());
}

bool FabricLoop::rediscover(std::string* err) {
  const auto d0 = Clock::now();
  auto t = client()->exclusive([&] {
    std::lock_guard setup(mad::umad_setup_mutex());
    return discover(o_, names_, err);
  });
  discovery_seconds_ = std::chrono::duration<double>(Clock::now() - d0).count();
  if (!t) return false;
  {
    std::lock_guard lock(topo_mu_);
    topo_ = std::move(t);
  }
  target_agents_.forget_all();
  agents_.forget_all();
  discovered_at_ = Clock::now();
  ++discoveries_;
  count_loop([](LoopCounters& lc) { ++lc.discoveries; });
  rediscover_ = false;
  return true;
}

void FabricLoop::open_client() {
  if (client()) return;
  std::string err;
  auto c = mad::MadClient::shared(o_.ca, o_.port, &err);
  std::lock_guard lock(topo_mu_);
  client_ = std::move(c);
  if (!client_) {
    count_loop([](LoopCounters& lc) { ++lc.discovery_errors; });
    spdlog::warn("pma fabric: cannot open MAD port: {}", err);
  }
}

void FabricLoop::discover_when_due() {
  const bool target_asks = target_asks_discovery_ && Clock::now() - target_discovery_at_ >= o_.discovery_period;
  if (!client() || !(rediscover_ || target_asks || !topology() || Clock::now() - discovered_at_ >= o_.discovery_period))
    return;
  if (target_asks) target_discovery_at_ = Clock::now();
  target_asks_discovery_ = false;  // this discovery looks for whatever a target missed
  std::string err;
  if (!rediscover(&err)) {
    count_loop([](LoopCounters& lc) { ++lc.discovery_errors; });
    spdlog::warn("pma fabric: discovery failed: {} (keeping the previous topology)", err);
  }
}

void FabricLoop::refresh_once() {
  const auto t0 = Clock::now();
  exporter::TextAccumulator text;  // the port series, node by node
  exporter::MetricSink sink;       // the loop's own series
  open_client();
  discover_when_due();
  if (o_.links) links_.observe(topology(), std::chrono::system_clock::now());
  if (o_.sm) poll_subnet_managers();
  if (o_.routes) read_forwarding_tables();
  const std::shared_ptr<const Topology> topo = topology();
  std::size_t ports_ok = 0;
  if (client_ && topo && o_.snapshot) {
    const auto answered = read_snapshot(*topo, text);
    if (!answered) return;  // stopped
    ports_ok = *answered;
  }
  count_loop([](LoopCounters& lc) { ++lc.refreshes; });
  emit_loop_series(topo.get(), ports_ok, std::chrono::duration<double>(Clock::now() - t0).count(), sink);
  text.add(std::move(sink));
  publish(std::move(text).finish());
  // A refresh of a large fabric allocates and frees megabytes of text and samples; hand the
  // pages back instead of keeping the peak resident until the next refresh.
  malloc_trim(0);
}

std::optional<std::size_t> FabricLoop::read_snapshot(const Topology& topo, exporter::TextAccumulator& text) {
  const auto& nodes = topo.nodes;
  std::vector<mad::AgentAsk> asks;
  std::vector<std::size_t> ask_of(nodes.size(), SIZE_MAX), node_of;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].ports.empty()) continue;
    mad::AgentAsk ask{.key = nodes[i].guid_label, .lid = nodes[i].lid, .port_select = 0, .ports = {}};
    for (const FabricPort& fp : nodes[i].ports) ask.ports.push_back({fp.lid, fp.number});
    ask_of[i] = asks.size();
    node_of.push_back(i);
    asks.push_back(std::move(ask));
  }
  auto choose = [&](std::uint16_t cap, std::size_t agent, std::size_t port) {
    auto attrs = attributes_for(cap, o_.vl_xmit_wait);
    if (wants_ext_speeds(nodes[node_of[agent]].ports[port])) attrs.push_back(mad::PmaAttr::kPortExtendedSpeedsCounters);
    return attrs;
  };
  // Whole query lists go in chunks so that a local-mode scrape waits at most one chunk.
  const std::size_t chunk = std::max<std::size_t>(256, o_.query.window * 4);
  auto query = [&](std::span<const mad::PmaQuery> qs, mad::Round round) {
    std::vector<mad::PmaReply> all;
    all.reserve(qs.size());
    for (std::size_t i = 0; i < qs.size() && !sleep_.stopped(); i += chunk) {
      mad::QueryStats st;
      auto part = client_->query(qs.subspan(i, std::min(chunk, qs.size() - i)), mad::round_options(o_.query, round), &st);
      count_loop([&](LoopCounters& lc) {
        lc.mads += st.sent;
        lc.stray += st.stray;
      });
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;  // stopped early: shorter, and the reader stops
  };
  const mad::AgentReads reads = agents_.read(asks, choose, query);
  if (reads.incomplete || sleep_.stopped()) return std::nullopt;
  ext_speeds_.rediscovered(topology());
  bool any_unreachable = false;
  std::size_t ports_ok = 0;
  const mad::AgentRead none;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const FabricNode& n = nodes[i];
    const mad::AgentRead& a = ask_of[i] == SIZE_MAX ? none : reads.agents[ask_of[i]];
    if (ask_of[i] != SIZE_MAX) any_unreachable |= note_node_read(n, a);
    exporter::MetricSink node_sink;  // rendered after each node: samples never pile up
    const exporter::Labels node{{"node_guid", n.guid_label}};
    if (!n.ports.empty()) emit_node(n, node, node_sink);
    for (std::size_t p = 0; p < a.ports.size(); ++p) {
      ports_ok += a.ports[p].answered();
      emit_fabric_port(n.ports[p], node, &a.ports[p].readings, node_sink);
      const ExtSpeedsTable::PortKey key{n.guid_label, n.ports[p].number};
      if (a.ports[p].readings.ext_speeds) ext_speeds_.set(key, *a.ports[p].readings.ext_speeds);
    }
    if (a.cap)
      emit_support("rdma_pma_fabric_attribute_supported",
                   "1 when every queried port of the node answers this optional PMA attribute, 0 when its "
                   "ClassPortInfo rules it out or a port answered 'unsupported' (that port's counters are absent).",
                   *a.cap, o_.vl_xmit_wait, a.refused(), {{"node_guid", n.guid_label}, {"node_name", n.name}}, node_sink);
    text.add(std::move(node_sink));
  }
  if (any_unreachable) rediscover_ = true;  // a node may have gone: look again next time
  return ports_ok;
}

bool FabricLoop::note_node_read(const FabricNode& n, const mad::AgentRead& a) {
  auto count_error = [&](mad::Outcome o) {
    count_loop([&](LoopCounters& lc) {
      auto& e = lc.node_errors[n.guid_label];
      e.name = n.name;
      ++e.by_reason[std::string(mad::outcome_label(o))];
    });
  };
  if (a.timeouts)
    count_loop([&](LoopCounters& lc) {
      auto& e = lc.node_errors[n.guid_label];
      e.name = n.name;
      e.timeouts += a.timeouts;
    });
  if (a.cpi_failure) count_error(a.cpi_failure->outcome());
  bool unreachable = false;
  for (std::size_t p = 0; p < a.ports.size(); ++p) {
    const std::uint8_t port = n.ports[p].number;
    for (const mad::Failure& f : a.ports[p].failures) {
      count_error(f.outcome());
      unreachable |= f.outcome() == mad::Outcome::kSendError || f.outcome() == mad::Outcome::kTimeout;
    }
    for (const mad::Failure& f : a.ports[p].newly_refused) {
      // State of the port, not an error: not asked again until the reader forgets the node.
      const bool timeout = f.reply.outcome == mad::Outcome::kTimeout;
      const std::string how = timeout ? std::string("no reply") : mad::status_text(f.reply.status);
      if (f.attr == mad::PmaAttr::kPortExtendedSpeedsCounters) {
        if (ext_speeds_.refuse({n.guid_label, port}))
          spdlog::info("pma fabric: {} ({}) port {} answers PortExtendedSpeedsCounters with {}: no FEC counters there "
                       "until the next discovery (further ports of this node not logged)",
                       n.name, n.guid_label, port, how);
        continue;
      }
      const std::string attr(mad::attr_name(f.attr));
      if (logged_.insert(n.guid_label + "/" + attr).second)
        spdlog::info("pma fabric: {} ({}) port {} answers {} with {}: its counters are not exported where refused "
                     "(further ports of this node not logged)",
                     n.name, n.guid_label, port, attr, how);
    }
  }
  return unreachable;
}

void FabricLoop::emit_loop_series(const Topology* topo, std::size_t ports_ok, double seconds, exporter::MetricSink& sink) {
  std::size_t ports_seen = 0;
  std::map<std::string, std::uint64_t> nodes_by_type;
  if (topo)
    for (const auto& n : topo->nodes) {
      ++nodes_by_type[n.type];
      ports_seen += n.ports.size();
    }
  sink.gauge("rdma_pma_fabric_scrape_duration_seconds",
             "Duration of the last fabric refresh (discovery, when it ran, and every PMA query).", {}, seconds);
  sink.gauge("rdma_pma_fabric_discovery_duration_seconds", "Duration of the last libibnetdisc discovery.", {},
             discovery_seconds_);
  for (const auto& [type, count] : nodes_by_type)
    sink.gauge_u64("rdma_pma_fabric_nodes", "Nodes in the discovered fabric, by node type.", {{"type", type}}, count);
  sink.gauge_u64("rdma_pma_fabric_ports", "Cabled ports with a LID in the discovered fabric.", {}, ports_seen);
  if (o_.snapshot)
    sink.gauge_u64("rdma_pma_fabric_ports_answered", "Ports whose PortCounters answered in the last refresh.", {},
                   ports_ok);
  LoopCounters& c = loop_counters();
  std::lock_guard lock(c.mu);
  sink.counter("rdma_pma_fabric_refreshes_total", "Fabric refreshes run since start.", {}, c.refreshes);
  sink.counter("rdma_pma_fabric_discoveries_total", "Fabric discoveries (libibnetdisc sweeps) that succeeded.", {},
               c.discoveries);
  sink.counter("rdma_pma_fabric_mads_total", "PMA MADs sent by fabric mode, retries included.", {}, c.mads);
  sink.counter("rdma_pma_fabric_stray_replies_total", "Replies that matched no outstanding request (late or duplicate).",
               {}, c.stray);
  sink.counter("rdma_pma_fabric_discovery_errors_total", "Failed fabric discoveries (or a MAD port that would not open).",
               {}, c.discovery_errors);
  for (const auto& [guid, e] : c.node_errors) {
    sink.counter("rdma_pma_fabric_mad_timeouts_total", "PMA MAD attempts to this node that timed out (each retry counts).",
                 {{"node_guid", guid}, {"node_name", e.name}}, e.timeouts);
    for (const auto& [reason, count] : e.by_reason)
      sink.counter("rdma_pma_fabric_mad_errors_total",
                   "PMA queries to this node that failed after every retry, by reason (timeout, mad_status, send_error, malformed).",
                   {{"node_guid", guid}, {"node_name", e.name}, {"reason", reason}}, count);
  }
  if (o_.links) links_.emit(sink);
  if (o_.sm) sm_.emit(sink);
  if (o_.routes) lft_.emit(sink);
  if (o_.snapshot && o_.ext_speeds) ext_speeds_.emit(sink);
}

void FabricLoop::count_request(const std::string& result) {
  TargetCounters& c = target_counters();
  std::lock_guard lock(c.mu);
  ++c.requests[result];
}

void FabricLoop::count_route_request(const std::string& result) {
  TargetCounters& c = target_counters();
  std::lock_guard lock(c.mu);
  ++c.route_requests[result];
}

TargetAnswer FabricLoop::read_target(std::uint64_t guid, const std::vector<int>& ports,
                                     std::optional<std::chrono::milliseconds> budget) {
  const auto started = Clock::now();
  const std::shared_ptr<const Topology> topo = topology();
  const FabricNode* n = topo ? topo->find(guid) : nullptr;
  if (!n) {
    count_request("unknown_target");
    return {404, "unknown target " + mad::guid_label(guid) + ": not a node of the last fabric discovery (see /pma/targets)\n"};
  }
  std::vector<const FabricPort*> wanted;
  for (const FabricPort& fp : n->ports)
    if (ports.empty() || std::find(ports.begin(), ports.end(), fp.number) != ports.end()) wanted.push_back(&fp);
  if (wanted.empty()) {
    count_request("bad_request");
    return {400, "target " + n->guid_label + " has no cabled port with a LID among those asked\n"};
  }
  // Two rounds at most (ClassPortInfo, then the counters), each with its retries, within the
  // budget (a third for FEC counters, below); the MAD queue may add a wait behind other targets, which the offset covers. The
  // header may shorten an attempt, never below the floor: a tiny header would otherwise turn
  // every answer into timeouts (and each timeout into a request for rediscovery).
  // PortExtendedSpeedsCounters, where a port announces extended speeds, is a third round of one
  // attempt (no retries: see sources/mad/pma_agent.h).
  const bool ext = std::any_of(wanted.begin(), wanted.end(), [&](const FabricPort* fp) { return wants_ext_speeds(*fp); });
  mad::QueryOptions q = o_.query;
  const unsigned attempts = 2 * (q.retries + 1) + (ext ? 1 : 0);
  if (budget) {
    const auto per_attempt = *budget / attempts;
    q.timeout = std::max(std::min(q.timeout, o_.target_min_attempt), std::min(q.timeout, per_attempt));
  }
  // The longest the read may take, which also bounds the wait for MAD tokens.
  const auto deadline = started + (budget ? std::max(*budget, attempts * q.timeout) : attempts * q.timeout);
  std::string key = n->guid_label + "/" + std::to_string(q.timeout.count());
  for (const FabricPort* fp : wanted) key += "," + std::to_string(fp->number);
  bool shared = false;
  TargetAnswer a = target_reads_.get(key, [&] { return read_target_now(*n, wanted, q, budget.has_value(), deadline); },
                                     &shared, deadline);
  {
    TargetCounters& c = target_counters();
    std::lock_guard lock(c.mu);
    ++c.requests[a.result];
    c.mads += a.mads;
  }
  if (a.status == 200) {  // this request's own MADs: 0 when it shared another's read
    exporter::MetricSink sink;
    sink.gauge_u64("rdma_pma_fabric_target_mads", "PMA MADs this target request sent, retries included (0: answered "
                   "from a read another request made, shared or cached for fabric-target-cache).", {}, a.mads);
    exporter::write_text(sink, a.body);
  }
  return a;
}

TargetAnswer FabricLoop::read_target_now(const FabricNode& node, const std::vector<const FabricPort*>& wanted,
                                         const mad::QueryOptions& q, bool fitted, MadBucket::Clock::time_point deadline) {
  const FabricNode* n = &node;
  const std::shared_ptr<mad::MadClient> client_ref = client();
  if (!client_ref) return {503, "the exporter's MAD port is not open\n", "unreachable"};
  std::uint64_t sent = 0;
  bool limited = false;
  bool port_busy = false;  // limited because the MAD port stayed busy past the deadline, not by the cap
  // Every round takes its MADs from the fabric-wide bucket first (retries are debited after).
  auto query = [&](std::span<const mad::PmaQuery> qs, const mad::QueryOptions& opts) {
    if (!target_bucket_.take(static_cast<double>(qs.size()), deadline)) {
      limited = true;
      return std::vector<mad::PmaReply>{};
    }
    mad::QueryStats st;
    mad::QueryOptions bounded = opts;
    bounded.start_by = deadline;  // the MAD port may be busy (another read, a discovery): not beyond the deadline
    auto r = client_ref->query(qs, bounded, &st);
    if (r.empty() && !qs.empty()) {
      limited = port_busy = true;
      return r;
    }
    sent += st.sent;
    if (st.sent > qs.size()) target_bucket_.debit(static_cast<double>(st.sent - qs.size()));
    return r;
  };
  auto refused = [&] {
    return TargetAnswer{503, "target " + n->guid_label + " not read: the fabric-wide MAD rate cap (fabric-target-mad-rate " +
                                 std::to_string(static_cast<std::uint64_t>(o_.target_mad_rate)) +
                                 "/s) leaves no room within the scrape timeout\n",
                        "rate_limited", sent};
  };
  auto fail = [&](const std::string& why) {
    target_asks_discovery_ = true;  // the node may have gone: the loop looks again, at most once per discovery period
    return TargetAnswer{503, "target " + n->guid_label + " (" + n->name + ") did not answer: " + why + " (MAD timeout " +
                                 std::to_string(q.timeout.count()) + " ms, " + std::to_string(q.retries) +
                                 " retries" + (fitted ? ", fitted to the scrape timeout" : "") + ")\n",
                        "unreachable", sent};
  };
  mad::AgentAsk ask{.key = n->guid_label, .lid = n->lid, .port_select = 0, .ports = {}};
  for (const FabricPort* fp : wanted) ask.ports.push_back({fp->lid, fp->number});
  auto choose = [&](std::uint16_t cap, std::size_t, std::size_t port) {
    AttrSet skip;
    if (!o_.error_details) {  // the default set: PortCounters + PortCountersExtended, 2 MADs a port
      skip.add(mad::PmaAttr::kPortRcvErrorDetails);
      skip.add(mad::PmaAttr::kPortXmitDiscardDetails);
    }
    auto attrs = attributes_for(cap, o_.vl_xmit_wait, skip);
    if (wants_ext_speeds(*wanted[port])) attrs.push_back(mad::PmaAttr::kPortExtendedSpeedsCounters);
    return attrs;
  };
  const mad::AgentReads reads = target_agents_.read(std::span(&ask, 1), choose, [&](auto qs, mad::Round round) {
    auto r = query(qs, mad::round_options(q, round));
    if (round == mad::Round::kDroppable) limited = false;  // FEC counters left out, the rest answered
    return r;
  });
  if (limited && port_busy)
    return TargetAnswer{503, "target " + n->guid_label + " not read: the MAD port stayed busy (other reads, a discovery) "
                             "past this request's time\n", "busy", sent};
  if (limited) return refused();
  const mad::AgentRead& a = reads.agents[0];
  if (a.cpi_failure) return fail("ClassPortInfo " + std::string(mad::outcome_label(a.cpi_failure->outcome())));
  std::size_t answered = 0;
  std::string first_error;
  for (std::size_t p = 0; p < wanted.size(); ++p) {
    const mad::PortRead& pr = a.ports[p];
    answered += pr.answered();
    if (first_error.empty() && pr.failed())
      first_error = "port " + std::to_string(wanted[p]->number) + " " + std::string(mad::attr_name(pr.failures[0].attr)) +
                    " " + std::string(mad::outcome_label(pr.failures[0].outcome()));
    for (const mad::Failure& f : pr.newly_refused) {
      if (f.attr != mad::PmaAttr::kPortExtendedSpeedsCounters) continue;
      std::lock_guard lock(target_mu_);
      if (target_logged_.insert(n->guid_label).second)
        spdlog::info("pma fabric: target {} ({}) port {} answers PortExtendedSpeedsCounters with {}: no FEC counters "
                     "there until the next discovery (further ports of this node not logged)",
                     n->name, n->guid_label, wanted[p]->number,
                     f.reply.outcome == mad::Outcome::kTimeout ? std::string("no reply") : mad::status_text(f.reply.status));
    }
  }
  if (answered == 0) return fail(first_error.empty() ? "no PortCounters" : first_error);
  const bool partial = answered < wanted.size();
  // The series carry only `port`: the target (and its node_guid label from /pma/targets) names
  // the node, and names live in the two _info series, so that a port costs well under 2 KB.
  exporter::MetricSink sink;
  emit_node(*n, {}, sink);
  for (std::size_t p = 0; p < wanted.size(); ++p) {
    const mad::PortRead& pr = a.ports[p];
    emit_fabric_port(*wanted[p], {}, pr.failed() ? nullptr : &pr.readings, sink);
    if (pr.readings.ext_speeds) emit_fec(*pr.readings.ext_speeds, {{"port", std::to_string(wanted[p]->number)}}, sink);
  }
  sink.gauge_u64("rdma_pma_fabric_target_ports_answered", "Ports of this target whose PortCounters answered.", {}, answered);
  exporter::TextAccumulator text;
  text.add(std::move(sink));
  return {200, std::move(text).finish(), partial ? "partial" : "ok", sent};
}

std::string FabricLoop::targets_json(std::string_view type) const {
  // One target group per node: its labels differ. `node_guid` becomes a target label (the /pma
  // series join their _info on it and `port`); the __meta_ labels are there for relabelling.
  std::string out = "[";
  const std::shared_ptr<const Topology> topo = topology();
  bool first = true;
  for (const FabricNode& n : topo ? topo->nodes : std::vector<FabricNode>{}) {
    if (n.ports.empty() || (!type.empty() && type != n.type)) continue;
    if (!first) out += ',';
    first = false;
    out += "\n{\"targets\":[";
    exporter::append_json_string(out, n.guid_label);
    out += "],\"labels\":{\"node_guid\":";
    exporter::append_json_string(out, n.guid_label);
    out += ",\"__meta_rdma_node_name\":";
    exporter::append_json_string(out, n.name);
    out += ",\"__meta_rdma_node_description\":";
    exporter::append_json_string(out, n.description);
    out += ",\"__meta_rdma_node_type\":";
    exporter::append_json_string(out, n.type);
    out += ",\"__meta_rdma_node_ports\":\"" + std::to_string(n.ports.size()) + "\"}}";
  }
  out += "\n]\n";
  return out;
}

}  // namespace rdma::collectors::pma
