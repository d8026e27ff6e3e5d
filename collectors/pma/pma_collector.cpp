// Collector "pma": InfiniBand port counters read from the Performance Management Agent with MADs
// (what perfquery does), instead of sysfs.
//  - local mode (default on): every local InfiniBand port libibumad lists, queried through its
//    own umad port at its own LID, synchronously at scrape time (a handful of MADs);
//  - fabric mode (opt-in): the fabric libibnetdisc finds, on a background loop: either every
//    cabled port refreshed into a snapshot that collect() copies, or (fabric-snapshot false) one
//    node per request at /pma?target=<node GUID>, listed for Prometheus at /pma/targets.
// Counters are only read (Get); this collector never sends a Set, so it never resets counters.
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <cerrno>
#include <optional>
#include <set>
#include <unistd.h>

#include "collectors/pma/fabric.h"
#include "collectors/pma/fabric_suspects.h"
#include "collectors/pma/pma_metrics.h"
#include "exporter/collector.h"
#include "exporter/query.h"
#include "sources/mad/lft_decode.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/pma_agent.h"

namespace rdma::collectors::pma {
namespace {

using exporter::MetricSink;

struct LocalOptions {
  bool enabled = true;
  bool vl_xmit_wait = true;
  mad::QueryOptions query;
};

class PmaCollector final : public exporter::Collector {
 public:
  PmaCollector(LocalOptions local, std::unique_ptr<FabricLoop> fabric, bool routes_allow_unauthenticated = false,
               double routes_rate = 5, bool targets_allow_unauthenticated = false)
      : local_(std::move(local)), fabric_(std::move(fabric)),
        routes_allow_unauthenticated_(routes_allow_unauthenticated),
        targets_allow_unauthenticated_(targets_allow_unauthenticated),
        route_gate_(std::make_unique<RouteGate>(routes_rate)) {}

  void start() override {
    if (fabric_) fabric_->start();
  }
  void stop() override {
    if (fabric_) fabric_->stop();
  }

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    if (local_.enabled) collect_local(ctx, out);
    if (fabric_) fabric_->collect(out);
  }

  std::vector<exporter::HttpPath> http_paths() override {
    if (!fabric_) return {};
    FabricLoop* f = fabric_.get();
    // Every /pma path is behind the access rule of /probe (exporter::refuse_unauthenticated):
    // the target list is the fabric's inventory and each target read sends MADs into it.
    return {{"/pma",
             [this, f](std::string_view query) {
               if (auto refusal = refuse_targets()) {
                 FabricLoop::count_request("unauthenticated");
                 return std::move(*refusal);
               }
               return serve_target(*f, query);
             }},
            {"/pma/targets",
             [this, f](std::string_view query) {
               if (auto refusal = refuse_targets()) return std::move(*refusal);
               return serve_targets(*f, query);
             }},
            {"/pma/routes",
             [this, f](std::string_view query) {
               return guarded_route_request(*f, [query](FabricLoop& l) { return serve_routes(l, query); });
             }},
            {"/pma/routes/suspects", [this, f](std::string_view query) {
               return guarded_route_request(*f, [query](FabricLoop& l) { return serve_suspects(l, query); });
             }}};
  }

 private:
  std::optional<exporter::HttpResponse> refuse_targets() const {
    return exporter::refuse_unauthenticated(exporter::request_identity(), targets_allow_unauthenticated_, "/pma",
                                            "collectors.pma.fabric_targets_allow_unauthenticated");
  }

  static exporter::HttpResponse bad(FabricLoop& f, std::string_view why) {
    f.count_request("bad_request");
    return exporter::bad_request(why);
  }

  // /pma/targets[?type=switch|ca|router]
  static exporter::HttpResponse serve_targets(FabricLoop& f, std::string_view query) {
    std::string error;
    auto params = exporter::parse_query(query, {"type"}, error);
    if (!params) return bad(f, error);
    const std::string* type = params->get("type");
    if (type && *type != "switch" && *type != "ca" && *type != "router")
      return bad(f, "/pma/targets takes only type=switch, type=ca or type=router");
    return {200, "application/json", f.targets_json(type ? *type : "")};
  }

  // /pma/routes and /pma/routes/suspects hand out the fabric's topology and compute routes: the
  // access rule of /probe first (before the query is even parsed), then RouteGate's bounds.
  // `compute` runs with the computation slot held.
  template <class Compute>
  exporter::HttpResponse guarded_route_request(FabricLoop& f, Compute&& compute) {
    if (auto refusal = exporter::refuse_unauthenticated(exporter::request_identity(), routes_allow_unauthenticated_,
                                                        "routes", "collectors.pma.fabric_routes_allow_unauthenticated")) {
      FabricLoop::count_route_request("unauthenticated");
      return std::move(*refusal);
    }
    RouteGate::Admission a = route_gate_->admit();
    if (!a.refused.empty()) {
      FabricLoop::count_route_request(a.refused);
      exporter::HttpResponse r{429, "text/plain; charset=utf-8",
                               a.refused == "busy" ? "another route request is being computed; retry\n"
                                                   : "route requests beyond collectors.pma.fabric_routes_rate; retry\n"};
      r.retry_after_s = route_gate_->retry_after_s();
      return r;
    }
    exporter::HttpResponse r = compute(f);
    FabricLoop::count_route_request(r.status == 200 ? "ok" : r.status == 400 ? "bad_request" : "no_tables");
    return r;
  }

  static exporter::HttpResponse no_tables() {
    return {503, "text/plain; charset=utf-8", "no forwarding tables read yet (fabric-routes off, or no discovery yet)\n"};
  }

  // /pma/routes?src=0x<GUID>[&port=N][&dst=<LID>] (fabric_routes.h)
  static exporter::HttpResponse serve_routes(FabricLoop& f, std::string_view query) {
    std::string error;
    auto params = exporter::parse_query(query, {"src", "port", "dst"}, error);
    if (!params) return exporter::bad_request(error);
    std::optional<std::uint64_t> src;
    int port = 0, dst = 0;
    if (const std::string* v = params->get("src")) {
      if (!(src = exporter::query_guid(*v)))
        return exporter::bad_request("src '" + exporter::quoted(*v) + "' is not a node GUID (0x followed by up to 16 hex digits)");
    }
    if (const std::string* v = params->get("port")) {
      auto n = exporter::query_number(*v, 1, 254);
      if (!n) return exporter::bad_request("port '" + exporter::quoted(*v) + "' is not a port number 1-254");
      port = static_cast<int>(*n);
    }
    if (const std::string* v = params->get("dst")) {
      auto n = exporter::query_number(*v, 1, mad::kMaxUnicastLid);
      if (!n) return exporter::bad_request("dst '" + exporter::quoted(*v) + "' is not a unicast LID 1-49151");
      dst = static_cast<int>(*n);
    }
    if (!src) return exporter::bad_request("missing parameter 'src' (a node GUID from /pma/targets)");
    auto body = f.routes_json(*src, port, dst);
    if (!body) return no_tables();
    return {200, "application/json", std::move(*body)};
  }

  // /pma/routes/suspects?lossy=<GUID>/<port>-<LID>,...&clean=... (fabric_suspects.h). Each list is
  // one query value (exporter/query.h: at most 1 KiB, about 40 pairs); the prober's own links feed
  // the same intersection without a list (rdma_pma_suspect_link, docs/fabric.md).
  static exporter::HttpResponse serve_suspects(FabricLoop& f, std::string_view query) {
    std::string error;
    auto params = exporter::parse_query(query, {"lossy", "clean"}, error);
    if (!params) return exporter::bad_request(error);
    std::vector<FabricLoop::PairVerdict> pairs;
    bool any_lossy = false;
    for (const char* key : {"lossy", "clean"}) {
      const std::string* v = params->get(key);
      if (!v) continue;
      const bool lossy = std::string_view(key) == "lossy";
      auto list = parse_pairs(*v, lossy);
      if (!list) return exporter::bad_request(std::string(key) + ": not a comma-separated list of <node GUID>/<port>-<LID>");
      for (const PairLoss& p : *list) pairs.push_back({p.src_guid, p.src_port, p.dst_lid, p.lossy});
      any_lossy |= lossy && !list->empty();
    }
    if (!any_lossy) return exporter::bad_request("missing parameter 'lossy' (the pairs that lose: <node GUID>/<port>-<LID>,...)");
    auto body = f.route_suspects_json(pairs);
    if (!body) return no_tables();
    return {200, "application/json", std::move(*body)};
  }

  // /pma?target=0x<16 hex digits>[&ports=1,2,...] (Prometheus encodes params: `ports=1,2`
  // arrives as ports=1%2C2)
  static exporter::HttpResponse serve_target(FabricLoop& f, std::string_view query) {
    std::string error;
    auto params = exporter::parse_query(query, {"target", "ports"}, error);
    if (!params) return bad(f, error);
    const std::string* target = params->get("target");
    const std::string* ports = params->get("ports");
    if (!target) return bad(f, "missing parameter 'target' (a node GUID from /pma/targets, e.g. target=0x0002c90300a1b2c3)");
    const std::optional<std::uint64_t> guid = exporter::query_guid(*target);
    if (!guid)
      return bad(f, "target '" + exporter::quoted(*target) + "' is not a node GUID (0x followed by up to 16 hex digits)");
    std::vector<int> port_list;
    if (ports) {
      std::string_view p = *ports;
      while (!p.empty()) {
        const auto comma = p.find(',');
        const std::string_view item = p.substr(0, comma);
        p = comma == std::string_view::npos ? std::string_view{} : p.substr(comma + 1);
        const auto n = exporter::query_number(item, 1, 254);
        if (!n) return bad(f, "ports '" + exporter::quoted(*ports) + "' is not a comma-separated list of port numbers 1-254");
        port_list.push_back(static_cast<int>(*n));
      }
    }
    TargetAnswer a = f.read_target(*guid, port_list, exporter::request_scrape_timeout());
    return {a.status, a.status == 200 ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8",
            std::move(a.body)};
  }

  // Held across scrapes: one umad agent per port for the daemon's life (no open/register/close
  // per scrape), and replies that come back after their deadline reach a registered agent and
  // are counted as strays instead of arriving at a closed one.
  struct PortState {
    std::shared_ptr<mad::MadClient> client;
    std::uint64_t port_guid = 0;  // another port GUID at the same place is another agent
  };

  static const model::PortModel* host_port(const model::HostModel& host, const std::string& dev, int port) {
    for (const auto& d : host.devices)
      if (d.name == dev)
        for (const auto& p : d.ports)
          if (static_cast<int>(p.number) == port) return &p;
    return nullptr;
  }

  void log_once(const std::string& key, const std::string& msg) {
    if (logged_.insert(key).second) spdlog::info("pma: {}", msg);
  }

  void collect_local(const exporter::ScrapeContext& ctx, MetricSink& out) {
    std::string list_error;
    const auto ports = mad::list_local_ports(&list_error);
    if (!list_error.empty()) ctx.errors.report("no_device", "umad", list_error);
    std::uint64_t queried = 0;
    std::set<std::string> listed;
    for (const auto& lp : ports) {
      const std::string id = lp.ca + "/" + std::to_string(lp.port);
      listed.insert(id);
      bool excluded = false;
      for (const auto& e : ctx.host.excluded) excluded |= e == lp.ca;
      if (excluded) continue;
      const model::PortModel* hp = host_port(ctx.host, lp.ca, lp.port);
      if (lp.link_layer == "Ethernet" || (hp && hp->link_layer == model::LinkLayer::kEthernet)) {
        log_once(id, "skipping " + id + ": link layer Ethernet (RoCE ports have no subnet management; use the port collector)");
        continue;
      }
      if (lp.state != 4 || lp.lid == 0) {
        agents_.forget(id);  // learned again when it is back (another agent may answer then)
        log_once(id + "/down", "skipping " + id + " while it is not ACTIVE with a LID (state " + std::to_string(lp.state) +
                                   ", lid " + std::to_string(lp.lid) + ")");
        continue;
      }
      ++queried;
      collect_port(ctx, lp, id, out);
    }
    std::erase_if(state_, [&](const auto& kv) {  // unplugged: close its agent
      if (!listed.count(kv.first)) agents_.forget(kv.first);
      return !listed.count(kv.first);
    });
    out.gauge_u64("rdma_pma_local_ports", "Local InfiniBand ports queried through their PMA in this scrape.", {}, queried);
  }

  void collect_port(const exporter::ScrapeContext& ctx, const mad::LocalPort& lp, const std::string& id, MetricSink& out) {
    PortState& st = state_[id];
    if (!st.client) {
      std::string err;
      int open_errno = 0;
      st.client = mad::MadClient::shared(lp.ca, lp.port, &err, &open_errno);
      // No umad device node here (a container without /dev/infiniband, PrivateDevices=yes) or
      // not allowed to open it: the host does not offer PMA queries to this process. State, not
      // an error; asked again every scrape, so that a node that appears is used.
      const bool no_node = open_errno == ENOENT || open_errno == EACCES || open_errno == EPERM;
      if (st.client || no_node)
        ctx.errors.capability("umad_device", id, st.client != nullptr,
                              "cannot open the umad device of " + id + " (" + err +
                                  "): local PMA counters are not read; give the exporter /dev/infiniband/umad* to read them");
      if (!st.client) {
        if (!no_node) ctx.errors.report("no_device", id, "cannot open MAD port " + id + ": " + err);
        return;
      }
    }
    if (st.port_guid != lp.port_guid) agents_.forget(id);
    st.port_guid = lp.port_guid;
    const std::shared_ptr<mad::MadClient> client = st.client;  // a send error drops st.client
    auto fail = [&](const mad::Failure& f) {
      if (f.outcome() == mad::Outcome::kSendError) st.client.reset();  // reopen the umad port next scrape
      const std::string reason(mad::outcome_label(f.outcome()));
      ctx.errors.report(reason, id + "/" + std::string(mad::attr_name(f.attr)),
                        "PMA " + std::string(mad::attr_name(f.attr)) + " of " + id + " (lid " + std::to_string(lp.lid) +
                            ") failed: " + reason + " " + mad::status_text(f.reply.status));
    };
    const mad::AgentAsk ask{.key = id, .lid = lp.lid,
                            .port_select = static_cast<std::uint8_t>(lp.port),
                            .ports = {{lp.lid, static_cast<std::uint8_t>(lp.port)}}};
    auto choose = [&](std::uint16_t cap, std::size_t, std::size_t) { return attributes_for(cap, local_.vl_xmit_wait); };
    mad::QueryStats stats;  // over the rounds
    auto query = [&](std::span<const mad::PmaQuery> qs, mad::Round round) {
      return client->query(qs, mad::round_options(local_.query, round), &stats);
    };
    const mad::AgentRead a = std::move(agents_.read(std::span(&ask, 1), choose, query, mad::kPmaLocal).agents[0]);
    if (a.cpi_failure) return fail(*a.cpi_failure);
    const mad::PortRead& pr = a.ports[0];
    for (const mad::Failure& f : pr.newly_refused) {
      const std::string attr(mad::attr_name(f.attr));
      log_once(id + "/unsupported/" + attr, id + " (lid " + std::to_string(lp.lid) + ") answers " + attr + " with " +
                                                mad::status_text(f.reply.status) + ": its counters are not exported");
    }
    for (const mad::Failure& f : pr.failures) fail(f);
    const std::uint16_t cap_mask = *a.cap;
    const AttrSet refused = pr.refused;
    const PortReadings& readings = pr.readings;
    const exporter::Labels base{{"device", lp.ca}, {"port", std::to_string(lp.port)}};
    emit_port(readings, "rdma_pma_port_", base, out);
    out.gauge_u64("rdma_pma_port_mads",
                  "PMA MADs this collector sent to the port in this scrape, retries included (attributes the port "
                  "collector read in the last second are taken from its answers, not asked again).",
                  base, stats.sent);
    exporter::Labels info = base;
    info.emplace_back("lid", std::to_string(lp.lid));
    info.emplace_back("port_guid", mad::guid_label(lp.port_guid));
    char cap[8];
    std::snprintf(cap, sizeof cap, "0x%04x", cap_mask);
    info.emplace_back("capability_mask", cap);
    out.info("rdma_pma_port_info", "Local port queried through its PMA: LID, port GUID, PerfMgt ClassPortInfo CapabilityMask.",
             std::move(info));
    emit_support("rdma_pma_port_attribute_supported",
                 "1 when the port's PMA answers this optional attribute, 0 when its ClassPortInfo or an 'unsupported' "
                 "MAD status says it does not (its counters are then absent).",
                 cap_mask, local_.vl_xmit_wait, refused, base, out);
  }

  LocalOptions local_;
  std::unique_ptr<FabricLoop> fabric_;
  bool routes_allow_unauthenticated_ = false;
  bool targets_allow_unauthenticated_ = false;
  std::unique_ptr<RouteGate> route_gate_;  // the bounds of /pma/routes and /pma/routes/suspects
  std::map<std::string, PortState> state_;
  // What each local port's agent said about itself ("ca/port"), shared with the port collector
  // (counters-source auto): a port's attributes are read once per scrape between the two.
  mad::PmaAgentReader& agents_ = mad::local_port_agents();
  std::set<std::string> logged_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "pma",
    .help = "InfiniBand port counters read with PMA MADs (like perfquery): local ports, and opt-in the whole fabric.",
    .enabled_by_default = true,
    .settings =
        {
            {"local", exporter::OptionType::kBool, "true",
             "Query the local InfiniBand ports libibumad lists (Ethernet/RoCE ports are skipped)."},
            {"timeout", exporter::OptionType::kDuration, "500ms", "Timeout of one PMA MAD attempt."},
            {"retries", exporter::OptionType::kInt, "2", "Extra attempts after a MAD timed out."},
            {"window", exporter::OptionType::kInt, "64", "PMA MADs in flight at most (fabric mode)."},
            {"vl-xmit-wait", exporter::OptionType::kBool, "true",
             "Also read PortVLXmitWaitCounters (per-VL transmit wait) where the agent supports it."},
            {"fabric", exporter::OptionType::kBool, "false",
             "Fabric mode: discover the fabric (libibnetdisc) and read every cabled port in the background."},
            {"fabric-ca", exporter::OptionType::kString, "", "CA to discover and query the fabric from (default: libibumad's)."},
            {"fabric-port", exporter::OptionType::kInt, "0", "CA port for fabric mode (0: the first active)."},
            {"fabric-period", exporter::OptionType::kDuration, "60s", "Fabric refresh period."},
            {"fabric-discovery-period", exporter::OptionType::kDuration, "10m",
             "Re-discover the fabric at most this often (and after unreachable nodes)."},
            {"fabric-snapshot", exporter::OptionType::kBool, "true",
             "Fabric mode: read every cabled port on the loop into /metrics (small fabrics). false: the loop only "
             "discovers, and Prometheus scrapes each node at /pma?target=<GUID>, found at /pma/targets (large "
             "fabrics, sharded by hashmod; see docs/fabric.md)."},
            {"fabric-error-details", exporter::OptionType::kBool, "false",
             "/pma targets also read PortRcvErrorDetails and PortXmitDiscardDetails (2 more MADs and 10 more series "
             "per port; the snapshot always reads them)."},
            {"fabric-target-cache", exporter::OptionType::kDuration, "5s",
             "/pma?target=: a finished read of a node answers the same request (node, ports) for this long, and "
             "concurrent requests share one read (see docs/fabric.md)."},
            {"fabric-target-mad-rate", exporter::OptionType::kInt, "2000",
             "/pma?target=: PMA MADs per second all target reads together may send (retries included); a request "
             "that cannot get its MADs within its scrape timeout answers 503 (result rate_limited)."},
            {"fabric-vl-xmit-wait", exporter::OptionType::kBool, "false",
             "Fabric mode: also read PortVLXmitWaitCounters (one more MAD per port)."},
            {"fabric-links", exporter::OptionType::kBool, "true",
             "Fabric mode: the link table (rdma_pma_fabric_link_*: both ends, training, degraded) from the "
             "PortInfos each discovery reads anyway; no MAD of its own."},
            {"fabric-link-retention", exporter::OptionType::kDuration, "24h",
             "Fabric mode: how long a link gone down stays in the link table with its last-known far end."},
            {"fabric-ext-speeds", exporter::OptionType::kBool, "true",
             "Fabric snapshot and /pma targets: also read PortExtendedSpeedsCounters (FEC counters, RS-FEC form where announced) of "
             "ports with extended speeds; a port whose agent refuses it is not asked again until rediscovery."},
            {"fabric-sm", exporter::OptionType::kBool, "true",
             "Fabric mode: SMInfo of every subnet manager the discovery found, once per refresh "
             "(rdma_pma_fabric_sm_*: one SMP per SM port)."},
            {"fabric-sm-stuck-polls", exporter::OptionType::kInt, "3",
             "Fabric mode: an SM whose ActCount does not advance over this many refreshes is stuck."},
            {"fabric-routes", exporter::OptionType::kBool, "true",
             "Fabric mode: read every switch's linear forwarding table after each discovery and master SM change "
             "(one SMP per 64 LIDs per switch) and serve routes at /pma/routes?src=<GUID>[&port=N][&dst=<LID>]."},
            {"fabric-routes-allow-unauthenticated", exporter::OptionType::kBool, "false",
             "Answer /pma/routes and /pma/routes/suspects (the fabric's topology) to callers the HTTP server did not "
             "authenticate (basic auth or a verified client certificate, --web.config.file); refused with 403 otherwise."},
            {"fabric-targets-allow-unauthenticated", exporter::OptionType::kBool, "false",
             "Answer /pma?target= and /pma/targets (the fabric's inventory; each target read sends MADs) to callers the "
             "HTTP server did not authenticate (basic auth or a verified client certificate, --web.config.file); "
             "refused with 403 otherwise."},
            {"fabric-routes-rate", exporter::OptionType::kInt, "5",
             "/pma/routes and /pma/routes/suspects: requests per second at most (bursts of one second's worth), one "
             "computed at a time; beyond, 429 with Retry-After."},
            {"fabric-route-links", exporter::OptionType::kBool, "false",
             "Fabric mode: also export each cable on each probe link's route (rdma_pma_route_link{device,port,dst_lid,"
             "hop,from,to}: one series per cable per InfiniBand probe link of this node's prober)."},
            {"fabric-lft-max-smps", exporter::OptionType::kInt, "65536",
             "Fabric mode: the most LinearForwardingTable SMPs one read of the tables sends."},
            {"node-name-map", exporter::OptionType::kString, "",
             "ibnetdiscover-format node-name-map file (\"0xGUID \\\"name\\\"\" per line) for the node_name labels.",
             true},
        },
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext&)
        -> std::unique_ptr<exporter::Collector> {
      LocalOptions local;
      local.enabled = s.boolean("local");
      local.vl_xmit_wait = s.boolean("vl-xmit-wait");
      local.query.timeout = s.positive_duration("timeout");
      local.query.retries = static_cast<unsigned>(s.integer("retries", 0, 20));
      local.query.window = static_cast<unsigned>(s.integer("window", 1, 4096));
      std::unique_ptr<FabricLoop> fabric;
      const bool routes_anyone = s.boolean("fabric-routes-allow-unauthenticated");
      const bool targets_anyone = s.boolean("fabric-targets-allow-unauthenticated");
      const auto routes_rate = static_cast<double>(s.integer("fabric-routes-rate", 1, 10000));
      if (s.boolean("fabric")) {
        FabricOptions f;
        f.ca = s.string("fabric-ca");
        f.port = static_cast<int>(s.integer("fabric-port", 0, 254));
        f.period = s.positive_duration("fabric-period");
        f.discovery_period = s.positive_duration("fabric-discovery-period");
        f.node_name_map = s.string("node-name-map");
        if (!f.node_name_map.empty() && access(f.node_name_map.c_str(), R_OK) != 0)
          throw s.error("node-name-map", "cannot read '" + f.node_name_map + "'");
        f.vl_xmit_wait = s.boolean("fabric-vl-xmit-wait");
        f.snapshot = s.boolean("fabric-snapshot");
        f.error_details = s.boolean("fabric-error-details");
        f.target_cache = s.positive_duration("fabric-target-cache");
        f.target_mad_rate = static_cast<double>(s.integer("fabric-target-mad-rate", 1, 1000000));
        f.links = s.boolean("fabric-links");
        f.link_retention = std::chrono::duration_cast<std::chrono::seconds>(s.positive_duration("fabric-link-retention"));
        f.sm = s.boolean("fabric-sm");
        f.ext_speeds = s.boolean("fabric-ext-speeds");
        f.sm_stuck_polls = static_cast<unsigned>(s.integer("fabric-sm-stuck-polls", 1, 1000));
        f.routes = s.boolean("fabric-routes");
        f.lft_max_smps = static_cast<std::size_t>(s.integer("fabric-lft-max-smps", 1, 100000000));
        f.route_links = s.boolean("fabric-route-links");
        f.query = local.query;
        fabric = std::make_unique<FabricLoop>(std::move(f));
      }
      return std::make_unique<PmaCollector>(std::move(local), std::move(fabric), routes_anyone, routes_rate,
                                            targets_anyone);
    },
});

}  // namespace rdma::collectors::pma
