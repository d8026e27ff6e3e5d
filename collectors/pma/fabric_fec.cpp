#include "collectors/pma/fabric_fec.h"

#include <numeric>

#include "collectors/pma/fabric.h"

namespace rdma::collectors::pma {

void ExtSpeedsTable::rediscovered(const std::shared_ptr<const Topology>& topo) {
  if (topo == seen_) return;
  seen_ = topo;
  logged_.clear();
  last_.clear();
}

bool ExtSpeedsTable::refuse(const PortKey& k) {
  last_.erase(k);
  return logged_.insert(k.first).second;
}

void ExtSpeedsTable::emit(exporter::MetricSink& out) const {
  for (const auto& [k, c] : last_) emit_fec(c, {{"node_guid", k.first}, {"port", std::to_string(k.second)}}, out);
}

void emit_fec(const mad::ExtSpeedsCounters& c, const exporter::Labels& l, exporter::MetricSink& out) {
  auto sum = [](const auto& lanes) { return std::accumulate(lanes.begin(), lanes.end(), std::uint64_t{0}); };
  out.counter("rdma_pma_fabric_port_fec_correctable_blocks_total",
              "FEC blocks corrected (PortExtendedSpeedsCounters: RS-FEC PortFECCorrectableBlockCounter, else the "
              "sum of the per-lane FEC correctable block counters; 32-bit, saturating).",
              l, c.rs_fec ? c.correctable_blocks : sum(c.fec_correctable_per_lane));
  out.counter("rdma_pma_fabric_port_fec_uncorrectable_blocks_total",
              "FEC blocks that could not be corrected (RS-FEC PortFECUncorrectableBlockCounter, else the per-lane sum).",
              l, c.rs_fec ? c.uncorrectable_blocks : sum(c.fec_uncorrectable_per_lane));
  if (c.rs_fec) {
    out.counter("rdma_pma_fabric_port_fec_corrected_symbols_total",
                "RS-FEC symbols corrected on the port (PortFECCorrectedSymbolCounter).", l, c.corrected_symbols);
    for (std::size_t lane = 0; lane < c.corrected_symbols_per_lane.size(); ++lane) {
      if (!c.corrected_symbols_per_lane[lane]) continue;  // 12 lanes, most unused: only those that count
      exporter::Labels ll = l;
      ll.emplace_back("lane", std::to_string(lane));
      out.counter("rdma_pma_fabric_port_fec_corrected_symbols_lane_total",
                  "RS-FEC symbols corrected per lane (lanes with a non-zero count only).", std::move(ll),
                  c.corrected_symbols_per_lane[lane]);
    }
  }
  out.counter("rdma_pma_fabric_port_sync_header_errors_total", "SyncHeaderErrorCounter (16-bit).", l,
              c.sync_header_errors);
  out.counter("rdma_pma_fabric_port_unknown_blocks_total", "UnknownBlockCounter (16-bit).", l, c.unknown_blocks);
}

}  // namespace rdma::collectors::pma
