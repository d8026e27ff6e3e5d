#include "collectors/pma/fabric_routes.h"

#include <infiniband/mad.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "collectors/pma/fabric.h"
#include "exporter/text.h"

namespace rdma::collectors::pma {

using Clock = std::chrono::steady_clock;

std::string_view route_error_name(RouteError e) {
  switch (e) {
    case RouteError::kNone: return "";
    case RouteError::kUnknownSource: return "unknown_source";
    case RouteError::kUnknownLid: return "unknown_lid";
    case RouteError::kNoTable: return "no_table";
    case RouteError::kNoEntry: return "no_entry";
    case RouteError::kDeadEnd: return "dead_end";
    case RouteError::kLoop: return "loop";
  }
  return "unknown";
}

std::string_view ar_state_name(ArState s) {
  switch (s) {
    case ArState::kUnknown: return "unknown";
    case ArState::kUnsupported: return "unsupported";
    case ArState::kDisabled: return "disabled";
    case ArState::kEnabled: return "enabled";
  }
  return "unknown";
}

std::size_t Route::adaptive_hops() const {
  std::size_t n = 0;
  for (const RouteHop& h : hops) n += h.adaptive;
  return n;
}

namespace {
const FabricPort* port_of(const FabricNode& n, std::uint8_t number) {
  for (const FabricPort& p : n.ports)
    if (p.number == number) return &p;
  return nullptr;
}

// The node and port that own a LID: a switch owns its port-0 LID, a CA or router port its base LID.
bool owns_lid(const FabricNode& n, std::uint8_t in_port, std::uint16_t lid) {
  if (n.type == "switch") return n.lid == lid;
  const FabricPort* p = port_of(n, in_port);
  return p && p->lid == lid;
}

bool lid_known(const Topology& topo, std::uint16_t lid) {
  for (const FabricNode& n : topo.nodes) {
    if (n.type == "switch" && n.lid == lid) return true;
    for (const FabricPort& p : n.ports)
      if (n.type != "switch" && p.lid == lid) return true;
  }
  return false;
}

Route fail(Route r, RouteError e, std::string detail) {
  r.error = e;
  r.detail = std::move(detail);
  return r;
}
}  // namespace

Route compute_route(const Topology& topo, const ForwardingTables& t, std::uint64_t src_guid, std::uint8_t src_port,
                    std::uint16_t dst_lid) {
  Route r;
  const FabricNode* n = topo.find(src_guid);
  const FabricPort* out = n ? port_of(*n, src_port) : nullptr;
  if (!out)
    return fail(std::move(r), RouteError::kUnknownSource,
                mad::guid_label(src_guid) + " port " + std::to_string(src_port) + " is not a cabled port of the fabric");
  if (!lid_known(topo, dst_lid))
    return fail(std::move(r), RouteError::kUnknownLid, "no port of the fabric has LID " + std::to_string(dst_lid));
  if (owns_lid(*n, src_port, dst_lid)) {  // to itself: no cable crossed
    r.hops.push_back({n->guid, n->name, 0, 0});
    return r;
  }
  if (n->type == "switch") {  // a switch as the source: its own table says where the LID goes
    r.hops.push_back({n->guid, n->name, 0, 0});
  } else {
    r.hops.push_back({n->guid, n->name, 0, src_port});
  }
  std::set<std::uint64_t> crossed;
  // The walk: `n` is the node just entered (or the source switch), through `in_port`.
  std::uint8_t in_port = 0;
  if (n->type != "switch") {
    const FabricNode* next = topo.find(out->remote_guid_value);
    if (!next) return fail(std::move(r), RouteError::kDeadEnd, "the far end of " + n->name + " port " +
                                                                  std::to_string(src_port) + " is not in the topology");
    in_port = static_cast<std::uint8_t>(std::atoi(out->remote_port.c_str()));
    n = next;
    r.hops.push_back({n->guid, n->name, in_port, 0});
  }
  for (;;) {
    RouteHop& here = r.hops.back();
    if (owns_lid(*n, in_port, dst_lid)) return r;  // arrived
    if (n->type != "switch")
      return fail(std::move(r), RouteError::kDeadEnd, n->name + " is not the destination of LID " + std::to_string(dst_lid));
    if (!crossed.insert(n->guid).second)
      return fail(std::move(r), RouteError::kLoop, "the route to LID " + std::to_string(dst_lid) + " comes back to " + n->name);
    if (crossed.size() > kMaxRouteSwitches)
      return fail(std::move(r), RouteError::kLoop, "more than " + std::to_string(kMaxRouteSwitches) + " switches");
    auto table = t.lft.find(n->guid);
    if (table == t.lft.end())
      return fail(std::move(r), RouteError::kNoTable, "no forwarding table read from " + n->name);
    const std::uint8_t port = dst_lid < table->second.size() ? table->second[dst_lid] : mad::kLftNoPort;
    if (port == mad::kLftNoPort || port == 0)
      return fail(std::move(r), RouteError::kNoEntry,
                  n->name + " has no forwarding entry for LID " + std::to_string(dst_lid) +
                      (dst_lid < table->second.size() ? "" : " (beyond its LinearFDBTop)"));
    here.out_port = port;
    const FabricPort* cable = port_of(*n, port);
    const FabricNode* next = cable ? topo.find(cable->remote_guid_value) : nullptr;
    if (!next)
      return fail(std::move(r), RouteError::kDeadEnd, n->name + " forwards LID " + std::to_string(dst_lid) +
                                                          " to port " + std::to_string(port) + ", which has no cable");
    in_port = static_cast<std::uint8_t>(std::atoi(cable->remote_port.c_str()));
    // With AR on, the switch may pick another port of the LID's group; the destination CA's own
    // cable is the one way to that port.
    here.adaptive = t.ar_state(n->guid) == ArState::kEnabled && !(next->type != "switch" && owns_lid(*next, in_port, dst_lid));
    n = next;
    r.hops.push_back({n->guid, n->name, in_port, 0});
  }
}

std::vector<std::string> route_ports(const Route& r) {
  std::vector<std::string> out;
  for (const RouteHop& h : r.hops) {
    if (h.in_port) out.push_back(h.name + "/" + std::to_string(h.in_port));
    if (h.out_port) out.push_back(h.name + "/" + std::to_string(h.out_port));
  }
  return out;
}

std::vector<RouteCable> route_cables(const Route& r) {
  std::vector<RouteCable> out;
  for (std::size_t i = 0; i + 1 < r.hops.size(); ++i)
    if (r.hops[i].out_port && r.hops[i + 1].in_port)
      out.push_back({r.hops[i].name + "/" + std::to_string(r.hops[i].out_port),
                     r.hops[i + 1].name + "/" + std::to_string(r.hops[i + 1].in_port)});
  return out;
}

void ForwardingTableCache::refresh(std::shared_ptr<const Topology> topo_ref, const std::string& ca, int port, const mad::QueryOptions& q) {
  const auto t0 = Clock::now();
  const Topology& topo = *topo_ref;
  madrpc_show_errors(0);
  int classes[] = {IB_SMI_CLASS};
  std::string ca_name = ca;
  ibmad_port* src = mad_rpc_open_port(ca_name.empty() ? nullptr : ca_name.data(), port, classes, 1);
  if (!src) {
    std::lock_guard lock(mu_);
    ++c_->failures;
    return;
  }
  const int timeout_ms = static_cast<int>(std::max<std::int64_t>(1, q.timeout.count()));
  mad_rpc_set_timeout(src, timeout_ms);
  // libibmad's "retries" is the number of attempts (0 picks its default of 3).
  const int attempts = static_cast<int>(q.retries) + 1;
  mad_rpc_set_retries(src, attempts);
  auto t = std::make_shared<ForwardingTables>();
  t->topology = topo_ref;
  std::size_t smps = 0, switches = 0, failed = 0, ar_smps = 0, ar_misses = 0;
  std::vector<std::string> ar_new_unsupported;
  std::string ar_first_why;
  bool capped = false;
  for (const FabricNode& n : topo.nodes) {
    if (n.type != "switch" || !n.switch_info || n.lid == 0) continue;
    const std::size_t blocks = mad::lft_blocks(*n.switch_info);
    const bool ask_ar = !ar_unsupported_.count(n.guid);
    if (smps + blocks + (ask_ar ? 1u : 0u) > o_.max_smps) {
      capped = true;
      break;
    }
    ib_portid_t id{};
    ib_portid_set(&id, n.lid, 0, 0);
    std::string ar_silent;  // why the switch, never heard on AdaptiveRoutingInfo, did not answer it
    if (ask_ar) {
      // One attempt: a switch that drops vendor SMPs costs one timeout, once.
      std::uint8_t buf[IB_SMP_DATA_SIZE] = {};
      int status = 0;
      ++smps;
      ++ar_smps;
      mad_rpc_set_retries(src, 1);
      const bool answered = smp_query_status_via(buf, &id, mad::kSmpAttrAdaptiveRoutingInfo, 0,
                                                 static_cast<unsigned>(timeout_ms), &status, src) != nullptr;
      mad_rpc_set_retries(src, attempts);
      const auto ar = answered ? mad::decode_adaptive_routing_info(std::span<const std::uint8_t>(buf, sizeof buf))
                               : std::nullopt;
      if (ar) {
        ar_answered_[n.guid] = ar->enabled ? ArState::kEnabled : ArState::kDisabled;
        t->ar[n.guid] = ar_answered_[n.guid];
      } else if (auto before = ar_answered_.find(n.guid); before != ar_answered_.end()) {
        ++ar_misses;  // it answered before: a lost SMP, not a switch without AR
        t->ar[n.guid] = before->second;
      } else {
        ar_silent = status ? "MAD status " + mad::status_text(static_cast<std::uint16_t>(status)) : "no reply";
      }
    } else {
      t->ar[n.guid] = ArState::kUnsupported;
    }
    std::vector<std::uint8_t> lft;
    lft.reserve(blocks * mad::kLftBlockEntries);
    bool ok = true;
    for (std::size_t b = 0; b < blocks && ok; ++b) {
      std::uint8_t buf[IB_SMP_DATA_SIZE] = {};
      ++smps;
      ok = smp_query_via(buf, &id, IB_ATTR_LINEARFORWTBL, static_cast<unsigned>(b), static_cast<unsigned>(timeout_ms), src);
      const auto block = ok ? mad::decode_lft_block(std::span<const std::uint8_t>(buf, sizeof buf)) : std::nullopt;
      if (block) lft.insert(lft.end(), block->begin(), block->end());
      ok = ok && block;
    }
    // A switch that answers its table but not AdaptiveRoutingInfo has none (or drops vendor SMPs,
    // as ibsim does): unsupported, not asked again. One that answers neither is unreachable, not
    // known to lack AR: asked again at the next read, never cached as static.
    if (!ar_silent.empty() && ok) {
      ar_unsupported_.insert(n.guid);
      t->ar[n.guid] = ArState::kUnsupported;
      if (ar_new_unsupported.empty()) ar_first_why = ar_silent;
      ar_new_unsupported.push_back(n.name + " (" + n.guid_label + ")");
    }
    if (!ok) {
      ++failed;
      continue;
    }
    lft.resize(std::min<std::size_t>(lft.size(), std::size_t{n.switch_info->linear_fdb_top} + 1));
    t->lft.emplace(n.guid, std::move(lft));
    ++switches;
  }
  mad_rpc_close_port(src);
  if (capped)
    spdlog::warn("pma fabric: forwarding tables: the SMP cap ({}) stops the read after {} switches", o_.max_smps, switches);
  if (!ar_new_unsupported.empty())
    spdlog::info("pma fabric: {} switch(es) answer no AdaptiveRoutingInfo (vendor SMP 0xFF20; first {}: {}): taken as "
                 "static routing and not asked again while in the fabric",
                 ar_new_unsupported.size(), ar_new_unsupported.front(), ar_first_why);
  // A switch that left the fabric is asked again if it comes back (new firmware, another model).
  std::erase_if(ar_unsupported_, [&](std::uint64_t g) { return !topo.find(g); });
  std::erase_if(ar_answered_, [&](const auto& e) { return !topo.find(e.first); });
  std::lock_guard lock(mu_);
  tables_ = std::move(t);
  read_ = true;
  ++c_->reads;
  c_->smps += smps;
  c_->failures += failed;
  c_->ar_smps += ar_smps;
  c_->ar_misses += ar_misses;
  last_smps_ = smps;
  last_switches_ = switches;
  last_failed_ = failed;
  last_seconds_ = std::chrono::duration<double>(Clock::now() - t0).count();
}

std::shared_ptr<const ForwardingTables> ForwardingTableCache::tables() const {
  std::lock_guard lock(mu_);
  return tables_;
}

void ForwardingTableCache::emit(exporter::MetricSink& out) const {
  std::lock_guard lock(mu_);
  if (!read_) return;
  out.counter("rdma_pma_fabric_lft_reads_total", "Reads of every switch's linear forwarding table (after a discovery or an SM change).",
              {}, c_->reads);
  out.counter("rdma_pma_fabric_lft_smps_total", "LinearForwardingTable SMPs sent (one per 64-LID block), retries excluded.",
              {}, c_->smps);
  out.counter("rdma_pma_fabric_lft_failures_total", "Switches whose forwarding table read failed (their routes are unknown).",
              {}, c_->failures);
  out.gauge_u64("rdma_pma_fabric_lft_switches", "Switches whose forwarding table the last read holds.", {}, last_switches_);
  out.gauge("rdma_pma_fabric_lft_read_duration_seconds", "Duration of the last forwarding table read.", {}, last_seconds_);
  out.counter("rdma_pma_fabric_adaptive_routing_smps_total",
              "AdaptiveRoutingInfo SMPs sent (one per switch and table read; none to a switch that never answered).", {},
              c_->ar_smps);
  out.counter("rdma_pma_fabric_adaptive_routing_misses_total",
              "AdaptiveRoutingInfo reads unanswered by a switch that answered before (its last state is kept).", {},
              c_->ar_misses);
  if (!tables_ || !tables_->topology) return;
  for (const FabricNode& n : tables_->topology->nodes) {
    if (n.type != "switch") continue;
    const ArState state = tables_->ar_state(n.guid);
    if (state == ArState::kUnknown) continue;  // not read (the SMP cap)
    for (ArState s : {ArState::kEnabled, ArState::kDisabled, ArState::kUnsupported})
      out.gauge_u64("rdma_pma_fabric_switch_adaptive_routing",
                    "1 for the switch's adaptive routing state (AdaptiveRoutingInfo): enabled (its forwarding table is "
                    "only the static fallback: routes through it are not the paths), disabled, unsupported (no answer: "
                    "taken as static).",
                    {{"node_guid", n.guid_label}, {"node_name", n.name}, {"state", std::string(ar_state_name(s))}},
                    state == s ? 1 : 0);
  }
}

std::string routes_json(const Topology& topo, const ForwardingTables& t, std::uint64_t src_guid, int src_port,
                        int dst_lid) {
  std::vector<std::uint16_t> lids;
  if (dst_lid > 0) {
    lids.push_back(static_cast<std::uint16_t>(dst_lid));
  } else {
    std::set<std::uint16_t> all;
    for (const FabricNode& n : topo.nodes)
      if (n.type == "switch") {
        if (n.lid) all.insert(n.lid);
      } else {
        for (const FabricPort& p : n.ports) all.insert(p.lid);
      }
    lids.assign(all.begin(), all.end());
  }
  // A CA routes from each of its ports; a switch from itself (its table decides the port: any
  // cabled port names it as the source).
  std::vector<std::uint8_t> ports;
  if (const FabricNode* n = topo.find(src_guid))
    for (const FabricPort& p : n->ports)
      if (n->type == "switch" ? ports.empty() : (src_port <= 0 || p.number == src_port)) ports.push_back(p.number);
  if (ports.empty()) ports.push_back(static_cast<std::uint8_t>(std::max(0, src_port)));
  std::string out = "{\"routes\":[";
  bool first = true, truncated = false;
  for (std::uint8_t sp : ports)
    for (std::uint16_t lid : lids) {
      if (out.size() >= kMaxRoutesAnswer) {
        truncated = true;
        break;
      }
      const Route r = compute_route(topo, t, src_guid, sp, lid);
      out += first ? "\n" : ",\n";
      first = false;
      out += "{\"src_guid\":\"" + mad::guid_label(src_guid) + "\",\"src_port\":" + std::to_string(sp) +
             ",\"dst_lid\":" + std::to_string(lid) + ",\"error\":";
      exporter::append_json_string(out, route_error_name(r.error));
      out += ",\"detail\":";
      exporter::append_json_string(out, r.detail);
      out += std::string(",\"adaptive_routing\":") + (r.adaptive_hops() ? "true" : "false") + ",\"hops\":[";
      for (std::size_t i = 0; i < r.hops.size(); ++i) {
        const RouteHop& h = r.hops[i];
        out += i ? "," : "";
        out += "{\"guid\":\"" + mad::guid_label(h.guid) + "\",\"name\":";
        exporter::append_json_string(out, h.name);
        out += ",\"in_port\":" + std::to_string(h.in_port) + ",\"out_port\":" + std::to_string(h.out_port);
        if (const FabricNode* hn = topo.find(h.guid); hn && hn->type == "switch")
          out += std::string(",\"ar_state\":\"") + std::string(ar_state_name(t.ar_state(h.guid))) + "\"";
        out += std::string(",\"adaptive\":") + (h.adaptive ? "true" : "false") + "}";
      }
      out += "]}";
    }
  out += std::string("\n],\"truncated\":") + (truncated ? "true" : "false") + "}\n";
  return out;
}

}  // namespace rdma::collectors::pma

namespace rdma::collectors::pma {

// The hook in the refresh: the tables are read again after a discovery (the topology, and with it
// the SM's routes, may have changed) and after the master SM changed (a new master re-routes).
void FabricLoop::read_forwarding_tables() {
  const std::shared_ptr<const Topology> topo = topology();
  const std::shared_ptr<mad::MadClient> c = client();
  if (!topo || !c) return;
  if (lft_read_ && discoveries_ == lft_discoveries_ && sm_.master_changes() == lft_sm_changes_) return;
  c->exclusive([&] {
    std::lock_guard setup(mad::umad_setup_mutex());
    lft_.refresh(topo, o_.ca, o_.port, o_.query);
  });
  lft_discoveries_ = discoveries_;
  lft_sm_changes_ = sm_.master_changes();
  lft_read_ = true;
}

std::optional<std::string> FabricLoop::routes_json(std::uint64_t src_guid, int src_port, int dst_lid) const {
  const std::shared_ptr<const ForwardingTables> t = lft_.tables();
  if (!t || !t->topology) return std::nullopt;
  return pma::routes_json(*t->topology, *t, src_guid, src_port, dst_lid);
}

}  // namespace rdma::collectors::pma
