// The fabric as a table of links, kept across discoveries: every link the last discovery found
// (both ends: node GUID, port, name; how it trained against what its ends could do, from the
// PortInfos libibnetdisc already read: no SMP of its own), and every link an earlier discovery
// found that is gone now, with its last-known far end and the time it was last seen up, until a
// discovery sees one of its ports cabled elsewhere or the retention passes.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "exporter/metrics.h"
#include "sources/mad/smp_decode.h"

namespace rdma::collectors::pma {

struct Topology;

// rdma_pma_fabric_link_changes_total{change}.
struct LinkCounts {
  std::uint64_t appeared = 0, disappeared = 0;
};

class LinkTable {
 public:
  // counts: where rdma_pma_fabric_link_changes_total goes (the fabric loop's process-wide counters,
  // so that it outlives a reload); nullptr: this table's own.
  explicit LinkTable(std::chrono::seconds retention, LinkCounts* counts = nullptr)
      : retention_(retention), c_(counts ? counts : &own_) {}
  LinkTable(const LinkTable&) = delete;
  LinkTable& operator=(const LinkTable&) = delete;
  // Takes in a topology (once: the same one again is a no-op) seen at `now`.
  void observe(const std::shared_ptr<const Topology>& topo, std::chrono::system_clock::time_point now);
  void emit(exporter::MetricSink& out) const;

  struct End {
    std::string guid, name;
    int port = 0;
    bool is_switch = false;
  };
  struct Link {
    End a, b;  // a: the switch end (the lower GUID between two switches), so that a link has one name
    bool up = false;
    std::optional<mad::LinkTraining> training;  // while up, where both ends' PortInfo was read
    std::chrono::system_clock::time_point last_seen_up;
  };
  using Key = std::tuple<std::string, int, std::string, int>;  // a.guid, a.port, b.guid, b.port
  const std::map<Key, Link>& links() const { return links_; }

 private:
  std::chrono::seconds retention_;
  std::shared_ptr<const Topology> seen_;
  std::map<Key, Link> links_;
  bool first_ = true;  // the first discovery is the baseline: nothing "appeared"
  LinkCounts own_;
  LinkCounts* c_;
};

}  // namespace rdma::collectors::pma
