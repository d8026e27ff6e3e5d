#include "collectors/pma/fabric_probe_routes.h"

#include <map>

#include "collectors/common/suspect_series.h"
#include "collectors/pma/fabric.h"
#include "collectors/pma/fabric_suspects.h"

namespace rdma::collectors::pma {

std::optional<PortRef> port_by_lid(const Topology& topo, std::uint16_t lid) {
  if (lid == 0) return std::nullopt;
  for (const FabricNode& n : topo.nodes) {
    if (n.type == "switch") continue;  // probes leave from CA ports
    for (const FabricPort& p : n.ports)
      if (p.lid == lid) return PortRef{n.guid, p.number};
  }
  return std::nullopt;
}

void write_probe_routes(const Topology& topo, const ForwardingTables& t, const model::IbProbeLinksView& links,
                        bool route_links, exporter::MetricSink& out) {
  out.gauge_u64("rdma_pma_route_probe_links",
                "InfiniBand probe links the prober published for its last window (their routes are below).", {},
                links.links.size());
  out.gauge_u64("rdma_pma_route_probe_links_dropped",
                "Probe links the prober published beyond the bound of the shared table (not routed).", {}, links.dropped);
  std::map<std::string, std::uint64_t> unrouted;  // by error
  std::vector<PairLoss> pairs;
  for (const model::IbProbeLink& l : links.links) {
    const std::optional<PortRef> src = port_by_lid(topo, l.src_lid);
    const Route r = src ? compute_route(topo, t, src->guid, src->port, l.dst_lid) : Route{{}, RouteError::kUnknownSource, ""};
    if (!r.ok()) {
      ++unrouted[std::string(route_error_name(r.error))];
      continue;
    }
    const std::string port = std::to_string(l.port), dst = std::to_string(l.dst_lid);
    const std::vector<RouteCable> cables = route_cables(r);
    out.gauge_u64("rdma_pma_route_hops",
                  "Cables the route of this probe link crosses (from the switches' forwarding tables).",
                  {{"device", l.device}, {"port", port}, {"dst_lid", dst}}, cables.size());
    out.gauge_u64("rdma_pma_route_adaptive_hops",
                  "Switches on the route of this probe link that route adaptively and could send it out another "
                  "port (0: the forwarding tables' route is the path; more: it is the static fallback).",
                  {{"device", l.device}, {"port", port}, {"dst_lid", dst}}, r.adaptive_hops());
    if (route_links)
      for (std::size_t i = 0; i < cables.size(); ++i)
        out.info("rdma_pma_route_link",
                 "A cable on the route of this probe link: hop (1 = from the local port), egress and ingress port "
                 "(\"<node>/<port>\").",
                 {{"device", l.device}, {"port", port}, {"dst_lid", dst}, {"hop", std::to_string(i + 1)},
                  {"from", cables[i].from}, {"to", cables[i].to}});
    // The intersection counts flows, as the prober's RoCE suspects do: each judged flow of the
    // link is one pair with the link's route.
    for (std::uint64_t f = 0; f < l.judged_flows; ++f)
      pairs.push_back({src->guid, src->port, l.dst_lid, f < l.lossy_flows, l.rail});
  }
  for (const auto& [error, n] : unrouted)
    out.gauge_u64("rdma_pma_route_unrouted_links",
                  "Probe links whose route is unknown, by why (unknown_source: the local LID is not in this fabric, "
                  "no_table, no_entry, dead_end, loop, unknown_lid).",
                  {{"error", error}}, n);
  const IbSuspects suspects = ib_suspects(topo, t, pairs);
  write_suspect_links(suspects.suspects,
                      {"rdma_pma_suspect_link",
                       "An InfiniBand cable that the prober's lossy flows cross and no clean flow of the rail does "
                       "(routes from the forwarding tables): the lossy flows it explains.",
                       "rdma_pma_suspect_link_clean_flows",
                       "Clean flows of the rail that cross this suspect cable (0 with "
                       "rdma_pma_suspect_link_adaptive_routing 0: strict)."},
                      out);
  for (std::size_t i = 0; i < suspects.suspects.size(); ++i) {
    const model::SuspectLink& s = suspects.suspects[i];
    out.gauge_u64("rdma_pma_suspect_link_adaptive_routing",
                  "1 when a route of the rail crosses a switch that routes adaptively: the suspect was derived from "
                  "the static fallback routes and is a lead, never strict; 0: static routes.",
                  {{"rail", s.group}, {"from", s.link.from}, {"to", s.link.to}}, suspects.adaptive[i] ? 1 : 0);
  }
}

}  // namespace rdma::collectors::pma
