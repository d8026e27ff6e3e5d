// Fabric mode: libibnetdisc discovery on a background loop, and the PMA counters of the
// discovered nodes over LID-routed MADs (bounded window, timeouts, retries), served two ways:
//  - snapshot: the loop reads every cabled port of every node and publishes an immutable text
//    that collect() copies out (one scrape holds the whole fabric: small fabrics);
//  - targets: /pma?target=<node GUID> reads one node on demand and /pma/targets lists the nodes
//    for Prometheus' http_sd_configs, so that Prometheus schedules, times out and shards the
//    fabric itself (the multi-target pattern of snmp_exporter and blackbox_exporter).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectors/pma/fabric_fec.h"
#include "collectors/pma/fabric_links.h"
#include "collectors/pma/fabric_routes.h"
#include "collectors/pma/fabric_sm.h"
#include "collectors/pma/pma_metrics.h"
#include "collectors/pma/target_guard.h"
#include "exporter/exposition.h"
#include "exporter/metrics.h"
#include "exporter/thread.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/pma_agent.h"
#include "sources/mad/pma_decode.h"
#include "sources/mad/smp_decode.h"

namespace rdma::collectors::pma {

struct FabricOptions {
  std::string ca;  // "" = libibumad's default
  int port = 0;
  std::chrono::milliseconds period{60000};
  std::chrono::milliseconds discovery_period{600000};
  std::string node_name_map;  // file path, "" = none
  bool vl_xmit_wait = false;
  bool snapshot = true;  // false: the loop only discovers; counters are read per target
  bool error_details = false;  // targets also read PortRcvErrorDetails and PortXmitDiscardDetails
  // /pma?target= bounds (target_guard.h, docs/fabric.md): a finished read answers the same request
  // for target_cache; target reads together send at most target_mad_rate MADs/s; the scrape
  // timeout header never shortens a MAD attempt below target_min_attempt (nor lengthens it
  // beyond `query.timeout`).
  std::chrono::milliseconds target_cache{5000};
  double target_mad_rate = 2000;
  std::chrono::milliseconds target_min_attempt{100};
  bool ext_speeds = true;      // the snapshot reads PortExtendedSpeedsCounters (fabric_fec.h)
  mad::QueryOptions query;
  bool links = true;  // the link table (rdma_pma_fabric_link_*), from discovery's PortInfos
  std::chrono::seconds link_retention{std::chrono::hours(24)};  // how long a link gone down is kept
  bool sm = true;               // SMInfo of the subnet managers, once per refresh (fabric_sm.h)
  unsigned sm_stuck_polls = 3;  // an SM whose ActCount stays for this many polls is stuck
  // Forwarding tables and routes (fabric_routes.h): every switch's LFT after each discovery and
  // master SM change, at most lft_max_smps SMPs a read; served at /pma/routes.
  bool routes = true;
  std::size_t lft_max_smps = 65536;
  // Each probe link's cables as rdma_pma_route_link (fabric_probe_routes.h): opt-in, a series per
  // cable per probe link.
  bool route_links = false;
};

struct FabricPort {
  std::uint16_t lid = 0;
  std::uint8_t number = 0;
  std::string remote_guid, remote_name, remote_port;
  std::uint64_t remote_guid_value = 0;
  std::optional<mad::PortInfo> info, remote_info;  // as libibnetdisc read them (SubnGet(PortInfo))
};
struct FabricNode {
  std::uint64_t guid = 0;
  std::string guid_label, name, type;  // type: switch, ca, router; name: node-name-map, else description
  std::string description;             // NodeDescription as the node reports it
  std::uint16_t lid = 0;               // where ClassPortInfo goes (switch port 0, else first port)
  std::vector<FabricPort> ports;
  std::optional<mad::SwitchInfo> switch_info;  // switches: as libibnetdisc read it (LinearFDBTop)
};
struct Topology {
  std::vector<FabricNode> nodes;
  std::map<std::uint64_t, std::size_t> by_guid;  // node GUID -> index in nodes
  std::vector<SmPort> sm_ports;                  // where SMInfo goes (see fabric_sm.h)
  const FabricNode* find(std::uint64_t guid) const {
    auto it = by_guid.find(guid);
    return it == by_guid.end() ? nullptr : &nodes[it->second];
  }
};


// Discovers the fabric with libibnetdisc; names from the map, else NodeDescription.
// nullptr and *error on failure.
std::unique_ptr<Topology> discover(const FabricOptions& o, const mad::NodeNameMap& names, std::string* error);

// The fabric loop's own counters (rdma_pma_fabric_{refreshes,discoveries,mads,stray_replies,
// discovery_errors,mad_timeouts,mad_errors}_total): one registry for the process, as
// target_counters() and the prober's ProbeRequestCounts, so that a reload that rebuilds the
// collector does not restart them at 0 (exact u64, never reset). The loop of the running instance
// writes them; a reload's stopping and starting loops may overlap, hence the mutex.
struct LoopCounters {
  struct NodeErrors {
    std::string name;
    std::uint64_t timeouts = 0;
    std::map<std::string, std::uint64_t> by_reason;
  };
  std::mutex mu;
  std::uint64_t refreshes = 0, discoveries = 0, mads = 0, stray = 0, discovery_errors = 0;
  std::map<std::string, NodeErrors> node_errors;  // by node guid
  // Those of the link table, SM monitor and forwarding tables: written by the loop thread only
  // (a reload stops the old loop before it starts the new one), read by it under mu.
  LinkCounts links;
  SmCounts sm;
  LftCounts lft;
};
LoopCounters& loop_counters();

class FabricLoop {
 public:
  explicit FabricLoop(FabricOptions o);
  ~FabricLoop();
  void start();
  void stop();
  // Copies the last snapshot (plus its age) into out; never blocks on the fabric.
  void collect(exporter::MetricSink& out) const;
  // Runs one refresh now on the calling thread (tests, benchmark).
  void refresh_once();
  // Discovers the fabric with the MAD port held exclusively; keeps the old topology on failure.
  bool rediscover(std::string* err);

  // /pma?target=: the counters of the cabled ports of node `guid` (all when `ports` is empty),
  // read now, each MAD attempt shortened so that the whole read fits `budget` when given (the
  // scrape timeout). 404 for a node the last discovery did not find, 503 when no port answered.
  // Safe to call from several threads and alongside the loop.
  TargetAnswer read_target(std::uint64_t guid, const std::vector<int>& ports, std::optional<std::chrono::milliseconds> budget);
  // /pma/targets: the discovered nodes with cabled ports (of node type `type` unless empty), as
  // http_sd_configs JSON.
  std::string targets_json(std::string_view type = {}) const;
  // A request refused before any MAD (bad or unknown target): counted by reason.
  static void count_request(const std::string& result);
  // A /pma/routes or /pma/routes/suspects request, by result (ok, bad_request, no_tables,
  // unauthenticated, busy, rate_limited).
  static void count_route_request(const std::string& result);
  // /pma/routes (fabric_routes.h): routes from a source over the last forwarding tables read;
  // nullopt before any read.
  std::optional<std::string> routes_json(std::uint64_t src_guid, int src_port, int dst_lid) const;
  // /pma/routes/suspects (fabric_suspects.h): the suspects of the given pairs' routes.
  struct PairVerdict {
    std::uint64_t src_guid = 0;
    std::uint8_t src_port = 0;
    std::uint16_t dst_lid = 0;
    bool lossy = false;
  };
  std::optional<std::string> route_suspects_json(const std::vector<PairVerdict>& pairs) const;

 private:
  struct Snapshot {
    std::shared_ptr<const std::string> text;  // rendered once per refresh: scrapes share it
    std::chrono::steady_clock::time_point taken;
  };
  void run();
  // The MADs of one target read (read_target's, behind its cache and rate cap).
  TargetAnswer read_target_now(const FabricNode& n, const std::vector<const FabricPort*>& wanted,
                               const mad::QueryOptions& q, bool fitted, MadBucket::Clock::time_point deadline);
  void publish(std::string text);
  std::shared_ptr<const Topology> topology() const;
  std::shared_ptr<mad::MadClient> client() const;

  FabricOptions o_;
  mad::NodeNameMap names_;
  std::shared_ptr<const Topology> topo_;  // replaced whole by rediscover(), under topo_mu_
  mutable std::mutex topo_mu_;           // topo_ and client_
  std::chrono::steady_clock::time_point discovered_at_{};
  std::atomic<bool> rediscover_{true};
  // A target that did not answer asks for a discovery (the node may have gone), granted at most
  // once per discovery_period: a client asking for a dead node, or with a tiny timeout header,
  // must not turn the discovery into a fabric-wide SMP sweep per refresh.
  std::atomic<bool> target_asks_discovery_{false};
  std::chrono::steady_clock::time_point target_discovery_at_ = std::chrono::steady_clock::now();
  double discovery_seconds_ = 0;
  // What each node's agent said about itself, keyed by node GUID (sources/mad/pma_agent.h has the
  // rule); everything is forgotten after each discovery too (a node may have been replaced).
  mad::PmaAgentReader agents_;
  std::set<std::string> logged_;  // node guid + attribute: refusals logged once
  // This instance's discoveries (the forwarding tables are read again after each); the counters
  // the loop exports are loop_counters().
  std::uint64_t discoveries_ = 0;
  std::shared_ptr<mad::MadClient> client_;
  LinkTable links_{o_.link_retention, &loop_counters().links};  // loop thread only
  SmMonitor sm_{o_.sm_stuck_polls, &loop_counters().sm};        // loop thread only
  void poll_subnet_managers();
  // Forwarding tables (fabric_routes.cpp): read after a discovery or a master SM change.
  ForwardingTableCache lft_{LftOptions{o_.lft_max_smps}, &loop_counters().lft};
  std::uint64_t lft_discoveries_ = 0, lft_sm_changes_ = 0;  // loop thread only: what the last read saw
  bool lft_read_ = false;
  void read_forwarding_tables();
  ExtSpeedsTable ext_speeds_;  // loop thread only
  // The steps of refresh_once.
  void open_client();
  void discover_when_due();
  // Reads every cabled port into `text`; the ports whose PortCounters answered, nullopt when stopped.
  std::optional<std::size_t> read_snapshot(const Topology& topo, exporter::TextAccumulator& text);
  // Counts a node's errors and timeouts and logs its refusals; true when a port did not answer.
  bool note_node_read(const FabricNode& n, const mad::AgentRead& a);
  void emit_loop_series(const Topology* topo, std::size_t ports_ok, double seconds, exporter::MetricSink& sink);
  bool wants_ext_speeds(const FabricPort& fp) const { return o_.ext_speeds && fp.info && fp.info->ext_speeds(); }
  // Target mode's own knowledge of each node's agent (agents_ belongs to the loop's refresh).
  mad::PmaAgentReader target_agents_;
  mutable std::mutex target_mu_;
  std::set<std::string> target_logged_;  // node GUIDs whose PortExtendedSpeedsCounters refusal was logged
  TargetReads target_reads_;
  MadBucket target_bucket_;

  mutable std::mutex snap_mu_;
  std::shared_ptr<const Snapshot> snap_;
  std::mutex run_mu_;           // start() and stop() against each other
  // The loop's one stop: its wait between refreshes, and the check between a read's chunks.
  exporter::StopSignal sleep_;
  std::thread thread_;
};

}  // namespace rdma::collectors::pma
