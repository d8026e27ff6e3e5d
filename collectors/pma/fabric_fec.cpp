#include "collectors/pma/fabric_fec.h"

#include <spdlog/spdlog.h>

#include <numeric>

#include "collectors/pma/fabric.h"

namespace rdma::collectors::pma {

void ExtSpeedsTable::rediscovered(const std::shared_ptr<const Topology>& topo) {
  if (topo == seen_) return;
  seen_ = topo;
  refused_.clear();
  logged_.clear();
  last_.clear();
}

bool ExtSpeedsTable::refuse(const PortKey& k) {
  refused_.insert(k);
  last_.erase(k);
  return logged_.insert(k.first).second;
}

void ExtSpeedsTable::emit(exporter::MetricSink& out) const {
  for (const auto& [k, c] : last_) {
    const exporter::Labels l{{"node_guid", k.first}, {"port", std::to_string(k.second)}};
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
}

void FabricLoop::read_ext_speeds(const Topology& topo) {
  ext_speeds_.rediscovered(topology());
  struct Slot {
    const FabricNode* node;
    int port;
    bool rs_fec;
  };
  std::vector<mad::PmaQuery> qs;
  std::vector<Slot> slots;
  for (const FabricNode& n : topo.nodes) {
    auto known = learned_.find(n.guid_label);
    if (known == learned_.end()) continue;  // ClassPortInfo not answered
    for (const FabricPort& fp : n.ports) {
      if (!fp.info || !fp.info->ext_speeds() || ext_speeds_.refused({n.guid_label, fp.number})) continue;
      qs.push_back({fp.lid, fp.number, mad::PmaAttr::kPortExtendedSpeedsCounters});
      slots.push_back({&n, fp.number, (known->second.cap & mad::kCapRsFec) != 0});
    }
  }
  // No retries: an agent that does not implement the attribute may drop it silently (ibsim does),
  // and a timeout is taken as a refusal until the next discovery, so that it costs one timeout
  // per port and discovery, not per refresh.
  mad::QueryOptions q = o_.query;
  q.retries = 0;
  const std::size_t chunk = std::max<std::size_t>(256, o_.query.window * 4);
  for (std::size_t i = 0; i < qs.size() && !stop_flag_; i += chunk) {
    mad::QueryStats st;
    const std::size_t len = std::min(chunk, qs.size() - i);
    auto replies = client_->query(std::span(qs).subspan(i, len), q, &st);
    mads_ += st.sent;
    stray_ += st.stray;
    for (std::size_t k = 0; k < len; ++k) {
      const Slot& s = slots[i + k];
      const auto& rep = replies[k];
      const ExtSpeedsTable::PortKey key{s.node->guid_label, s.port};
      if (rep.outcome == mad::Outcome::kOk) {
        if (auto c = mad::decode_ext_speeds_counters(rep.payload(), s.rs_fec)) ext_speeds_.set(key, *c);
      } else if ((rep.outcome == mad::Outcome::kStatus && mad::status_unsupported(rep.status)) ||
                 rep.outcome == mad::Outcome::kTimeout) {
        if (ext_speeds_.refuse(key))
          spdlog::info("pma fabric: {} ({}) port {} answers PortExtendedSpeedsCounters with {}: no FEC counters there "
                       "until the next discovery (further ports of this node not logged)",
                       s.node->name, s.node->guid_label, s.port,
                       rep.outcome == mad::Outcome::kTimeout ? std::string("no reply") : mad::status_text(rep.status));
      }
      // Other failures: the PortCounters round of the same refresh counts them per node.
    }
  }
}

}  // namespace rdma::collectors::pma
