// The prober's InfiniBand links and how they fared over its last window, for the pma collector's
// routes and suspect links: the prober knows which (local port -> peer LID) links lose, the pma
// collector in fabric mode knows every route; collectors do not include each other, so the prober
// publishes here and the pma collector reads. Bounded (kMaxLinks), thread-safe, replaced whole at
// every window: a reader sees one window's links, never a mix, and nothing older than `stale_after`.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rdma::model {

struct IbProbeLink {
  std::string device;                      // local device and port the flows leave from
  unsigned port = 0;
  std::uint16_t src_lid = 0;               // that port's LID (0: unknown)
  std::uint16_t dst_lid = 0;               // the peer port's LID, from its port table
  std::string rail;                        // the pair's rail label ("" if none)
  std::uint64_t judged_flows = 0;          // flows with enough probes in the window to judge
  std::uint64_t lossy_flows = 0;           // of those, the lossy ones (prober's localize rule)
  bool operator==(const IbProbeLink&) const = default;
};

struct IbProbeLinksView {
  std::vector<IbProbeLink> links;  // one per (device, port, dst_lid), sorted by them
  std::size_t dropped = 0;         // links beyond kMaxLinks in the last publication, left out
};

class IbProbeLinkBoard {
 public:
  using Clock = std::chrono::steady_clock;
  // The most links held: a node's probe links (peers x local ports), with room; the pma
  // collector's series (rdma_pma_route_hops) are bounded by it.
  static constexpr std::size_t kMaxLinks = 4096;

  // Replaces what is held with one window's links. Links without a destination LID are left out;
  // two entries for one (device, port, dst_lid) are summed (one link, several peer names); beyond
  // kMaxLinks the rest are dropped (counted). The view goes stale `stale_after` after this call
  // (a prober that stopped publishing, e.g. its loop ended): give a few windows.
  void publish(std::vector<IbProbeLink> links, Clock::duration stale_after, Clock::time_point now = Clock::now());
  // The prober stopped: nothing is held.
  void clear();
  // The last publication, or an empty view when none or stale.
  std::shared_ptr<const IbProbeLinksView> view(Clock::time_point now = Clock::now()) const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const IbProbeLinksView> view_;
  Clock::time_point stale_at_{};
};

// The process's board: the prober publishes into it, the pma collector reads it.
IbProbeLinkBoard& ib_probe_links();

}  // namespace rdma::model
