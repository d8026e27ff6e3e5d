// PortExtendedSpeedsCounters (PMA 0x001F) in the fabric snapshot: FEC block and symbol counters of
// the ports whose PortInfo announces extended speeds (FDR and faster), in the RS-FEC form where the
// node's PMA ClassPortInfo sets IsPMRSFECCountersSupported. An agent that answers "unsupported", or
// does not answer (ibsim drops the attribute), is state: that port is not asked again until the
// next discovery, logged once per node.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "exporter/metrics.h"
#include "sources/mad/smp_decode.h"

namespace rdma::collectors::pma {

struct Topology;

class ExtSpeedsTable {
 public:
  using PortKey = std::pair<std::string, int>;  // node GUID label, port
  // Forgets what was learned when `topo` is a new discovery.
  void rediscovered(const std::shared_ptr<const Topology>& topo);
  bool refused(const PortKey& k) const { return refused_.count(k) != 0; }
  // Returns true when this refusal is the node's first (to be logged).
  bool refuse(const PortKey& k);
  void set(const PortKey& k, const mad::ExtSpeedsCounters& c) { last_[k] = c; }
  void emit(exporter::MetricSink& out) const;

 private:
  std::shared_ptr<const Topology> seen_;
  std::set<PortKey> refused_;
  std::set<std::string> logged_;
  std::map<PortKey, mad::ExtSpeedsCounters> last_;
};

}  // namespace rdma::collectors::pma
