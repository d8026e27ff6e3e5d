// Fabric mode: libibnetdisc discovery, then every cabled port of every node over LID-routed PMA
// MADs (bounded window, timeouts, retries) on a background loop that publishes an immutable
// snapshot; collect() only copies the last snapshot out.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collectors/pma/pma_metrics.h"
#include "exporter/metrics.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/pma_decode.h"

namespace rdma::collectors::pma {

struct FabricOptions {
  std::string ca;  // "" = libibumad's default
  int port = 0;
  std::chrono::milliseconds period{60000};
  std::chrono::milliseconds discovery_period{600000};
  std::string node_name_map;  // file path, "" = none
  bool vl_xmit_wait = false;
  mad::QueryOptions query;
};

struct FabricPort {
  std::uint16_t lid = 0;
  std::uint8_t number = 0;
  std::string remote_guid, remote_name, remote_port;
};
struct FabricNode {
  std::uint64_t guid = 0;
  std::string guid_label, name, type;  // type: switch, ca, router
  std::uint16_t lid = 0;               // where ClassPortInfo goes (switch port 0, else first port)
  std::vector<FabricPort> ports;
};
struct Topology {
  std::vector<FabricNode> nodes;
};

// Discovers the fabric with libibnetdisc; names from the map, else NodeDescription.
// nullptr and *error on failure.
std::unique_ptr<Topology> discover(const FabricOptions& o, const mad::NodeNameMap& names, std::string* error);

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

 private:
  struct Snapshot {
    std::shared_ptr<const std::string> text;  // rendered once per refresh: scrapes share it
    std::chrono::steady_clock::time_point taken;
  };
  void run();
  void publish(std::string text);

  FabricOptions o_;
  mad::NodeNameMap names_;
  std::unique_ptr<Topology> topo_;
  std::chrono::steady_clock::time_point discovered_at_{};
  bool rediscover_ = true;
  double discovery_seconds_ = 0;
  // What each node's agent said about itself (node guid -> ClassPortInfo CapabilityMask, and the
  // optional attributes each port number refused). A node is here once its ClassPortInfo answered;
  // all is learned again after each discovery (a node may have been replaced or upgraded).
  struct Learned {
    std::uint16_t cap = 0;
    std::map<std::uint8_t, AttrSet> refused;
  };
  std::map<std::string, Learned> learned_;
  std::set<std::string> logged_;  // node guid + attribute: refusals logged once
  struct NodeErrors {
    std::string name;
    std::uint64_t timeouts = 0;
    std::map<std::string, std::uint64_t> by_reason;
  };
  std::map<std::string, NodeErrors> node_errors_;    // cumulative, by node guid
  std::uint64_t refreshes_ = 0, mads_ = 0, discovery_errors_ = 0, stray_ = 0;
  std::shared_ptr<mad::MadClient> client_;

  mutable std::mutex snap_mu_;
  std::shared_ptr<const Snapshot> snap_;
  std::mutex run_mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> stop_flag_{false};
  std::thread thread_;
};

}  // namespace rdma::collectors::pma
