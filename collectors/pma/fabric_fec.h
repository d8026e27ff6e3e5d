// PortExtendedSpeedsCounters (PMA 0x001F) in the fabric snapshot and /pma targets: FEC block and symbol counters of
// the ports whose PortInfo announces extended speeds (FDR and faster), in the RS-FEC form where the
// node's PMA ClassPortInfo sets IsPMRSFECCountersSupported. An agent that answers "unsupported", or
// does not answer (ibsim drops the attribute), is state: the PMA agent reader does not ask that port
// again until it forgets the node's agent (sources/mad/pma_agent.h), logged once per node.
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
  // The port refused the attribute (the PMA agent reader keeps it from being asked again); true
  // when this refusal is the node's first since the discovery (to be logged).
  bool refuse(const PortKey& k);
  void set(const PortKey& k, const mad::ExtSpeedsCounters& c) { last_[k] = c; }
  void emit(exporter::MetricSink& out) const;

 private:
  std::shared_ptr<const Topology> seen_;
  std::set<std::string> logged_;
  std::map<PortKey, mad::ExtSpeedsCounters> last_;
};

// The FEC series of one port's PortExtendedSpeedsCounters with `base` labels (node_guid and port in
// the snapshot, port alone in a /pma target answer).
void emit_fec(const mad::ExtSpeedsCounters& c, const exporter::Labels& base, exporter::MetricSink& out);

}  // namespace rdma::collectors::pma
