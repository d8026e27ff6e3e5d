// InfiniBand routes from the switches' linear forwarding tables: the cables between any two ports.
//
// In fabric mode the loop reads each switch's LinearForwardingTable (SMP attribute 0x0019, LID-routed
// SubnGet, one 64-entry block per MAD, blocks up to the LinearFDBTop the discovery's SwitchInfo
// reports), after every discovery that succeeded and whenever the master SM changed, and keeps the
// tables with the topology they were read against. A route is then a pure function of the two:
// from a source port, hop by hop through each switch's entry for the destination LID, as ibtracert
// walks it (but without a MAD per hop: the tables are cached). Loops, missing entries, unknown LIDs
// and cables the discovery did not see are errors as values.
//
// Routes feed the same intersection as the RoCE tracer (rdma::model::suspect_links): a route's path
// is the sequence of ports it crosses ("<node name>/<port>", source port first), so that a cable is
// a pair (egress port, ingress port); the pairs inside a switch (ingress, egress) are dropped from
// the suspects (only cables are named).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/metrics.h"
#include "sources/mad/lft_decode.h"
#include "sources/mad/mad_client.h"

namespace rdma::collectors::pma {

struct Topology;

// Adaptive routing on a switch, from its AdaptiveRoutingInfo (mad::decode_adaptive_routing_info):
// enabled: the switch forwards the LIDs of its AR groups by load and its linear table is only the
// static fallback, so a route walked through it is one path the packets may take, not the one they
// took; disabled: the table is the path; unsupported: the switch answered no AdaptiveRoutingInfo
// (another vendor, older firmware, or ibsim, which drops vendor SMPs), taken as static; unknown:
// not read (the SMP cap stopped the read before it).
enum class ArState : std::uint8_t { kUnknown, kUnsupported, kDisabled, kEnabled };
std::string_view ar_state_name(ArState s);  // "unknown", "unsupported", "disabled", "enabled"

// The linear forwarding table of each switch, by node GUID: entry l is the output port for LID l
// (mad::kLftNoPort where the SM routed nothing), up to LinearFDBTop; and each switch's AR state.
struct ForwardingTables {
  std::map<std::uint64_t, std::vector<std::uint8_t>> lft;
  std::map<std::uint64_t, ArState> ar;       // by switch GUID; a switch not listed: kUnknown
  std::shared_ptr<const Topology> topology;  // what they were read against (routes walk this one)
  ArState ar_state(std::uint64_t guid) const {
    auto it = ar.find(guid);
    return it == ar.end() ? ArState::kUnknown : it->second;
  }
};

struct RouteHop {
  std::uint64_t guid = 0;
  std::string name;
  std::uint8_t in_port = 0;   // 0 on the source
  std::uint8_t out_port = 0;  // 0 on the destination
  // A switch with adaptive routing enabled chose out_port: the packets may leave by another port
  // of the destination's AR group. Never set where out_port is the destination CA's own cable (a
  // CA port has one cable: there is nothing to choose between).
  bool adaptive = false;
};

enum class RouteError : std::uint8_t {
  kNone,
  kUnknownSource,  // the source node or port is not a cabled port of the topology
  kUnknownLid,     // no port of the topology has the destination LID
  kNoTable,        // a switch on the way has no forwarding table read (yet)
  kNoEntry,        // the switch's table has no valid entry for the LID (beyond LinearFDBTop, or 255)
  kDeadEnd,        // the entry names a port with no cable, or a CA that is not the destination
  kLoop,           // the walk came back to a switch it already crossed
};
std::string_view route_error_name(RouteError e);  // "unknown_source", ..., "" for kNone

struct Route {
  std::vector<RouteHop> hops;  // source first; on error: the hops walked so far
  RouteError error = RouteError::kNone;
  std::string detail;          // the error in words (which switch, which entry)
  bool ok() const { return error == RouteError::kNone; }
  std::size_t adaptive_hops() const;  // hops whose egress adaptive routing may change
};

// Switch hops at most: IBA subnets are far shallower (a 3-level fat tree crosses 5 switches); a walk
// longer than this without revisiting a switch cannot be a route of a real table.
inline constexpr std::size_t kMaxRouteSwitches = 64;

// Pure: the route of (source node GUID, source port) -> destination LID over the topology and tables.
Route compute_route(const Topology& topo, const ForwardingTables& t, std::uint64_t src_guid, std::uint8_t src_port,
                    std::uint16_t dst_lid);

// The ports a route crosses, "<node name>/<port>", source port first (path for suspect_links).
std::vector<std::string> route_ports(const Route& r);
struct RouteCable {
  std::string from, to;  // "<node name>/<port>", from = egress side
};
// The cables of a route, source side first (hops - 1 of them for a complete route).
std::vector<RouteCable> route_cables(const Route& r);

// Reads and caches the forwarding tables (the loop thread only; tables() is safe from any thread).
struct LftOptions {
  std::size_t max_smps = 65536;  // per refresh: a fabric needing more reads the first switches only
};
// rdma_pma_fabric_lft_{reads,smps,failures}_total.
struct LftCounts {
  std::uint64_t reads = 0, smps = 0, failures = 0;
  std::uint64_t ar_smps = 0, ar_misses = 0;  // AdaptiveRoutingInfo SMPs, and misses of switches that answered before
};
class ForwardingTableCache {
 public:
  // counts: where the counters go (the fabric loop's process-wide ones, so that they outlive a
  // reload); nullptr: this cache's own.
  explicit ForwardingTableCache(LftOptions o = {}, LftCounts* counts = nullptr) : o_(o), c_(counts ? counts : &own_) {}
  ForwardingTableCache(const ForwardingTableCache&) = delete;
  ForwardingTableCache& operator=(const ForwardingTableCache&) = delete;
  // Reads every switch's table up to its LinearFDBTop through a libibmad port of (ca, port), one
  // SMP at a time (q.timeout per attempt, q.retries), at most o.max_smps SMPs; the caller holds the
  // MAD port exclusively (as for a discovery). A switch whose read fails keeps no table (its
  // routes are kNoTable) and is counted.
  // Before its table, each switch's AdaptiveRoutingInfo (one SMP, one attempt, within the same
  // cap): a switch that answers its table but never answered AdaptiveRoutingInfo is `unsupported`
  // and not asked again while it stays in the fabric (one log line per read that finds new ones);
  // one that answered before and misses a read keeps its last state (counted); one that answers
  // neither stays unknown and is asked again.
  void refresh(std::shared_ptr<const Topology> topo, const std::string& ca, int port, const mad::QueryOptions& q);
  std::shared_ptr<const ForwardingTables> tables() const;
  void emit(exporter::MetricSink& out) const;

 private:
  LftOptions o_;
  mutable std::mutex mu_;
  std::shared_ptr<const ForwardingTables> tables_;
  LftCounts own_;
  LftCounts* c_;
  bool read_ = false;  // a read finished: the series appear
  // AdaptiveRoutingInfo (the loop thread only):
  std::map<std::uint64_t, ArState> ar_answered_;  // the last state of switches that answered
  std::set<std::uint64_t> ar_unsupported_;        // switches that never answered: not asked again
  std::size_t last_smps_ = 0, last_switches_ = 0, last_failed_ = 0;
  double last_seconds_ = 0;
};

// /pma/routes?src=<node GUID>[&port=N][&dst=<LID>]: the routes from the source's cabled ports
// (`port` only, when given) to `dst`, or to every CA port LID and switch LID of the topology, as
// JSON: {"routes":[{"src_guid","src_port","dst_lid","error","detail","adaptive_routing","hops":[{"guid",
// "name","in_port","out_port"[,"ar_state" on switches],"adaptive"}]}],"truncated":false}. One source per request bounds an answer to the
// fabric's LIDs, and kMaxRoutesAnswer bounds its size: the routes that did not fit are left out
// ("truncated":true; ask them with dst=).
inline constexpr std::size_t kMaxRoutesAnswer = 4u << 20;
std::string routes_json(const Topology& topo, const ForwardingTables& t, std::uint64_t src_guid, int src_port,
                        int dst_lid);

}  // namespace rdma::collectors::pma
