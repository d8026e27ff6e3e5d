// Each probe link's route, and the InfiniBand suspects fed by the prober's own verdicts: the
// prober publishes its InfiniBand links and their lossy/clean flows per window
// (sources/model/probe_links.h); fabric mode routes each one over the last forwarding tables read
// and runs the intersection (fabric_suspects.h) on them, per rail. Pure: the caller passes the
// tables and the view.
#pragma once

#include "collectors/pma/fabric_routes.h"
#include "exporter/metrics.h"
#include "sources/model/probe_links.h"

namespace rdma::collectors::pma {

// The local port that owns `lid` (a CA or router port of the topology): its node GUID and port
// number; nullopt when none does.
struct PortRef {
  std::uint64_t guid = 0;
  std::uint8_t port = 0;
};
std::optional<PortRef> port_by_lid(const Topology& topo, std::uint16_t lid);

// Writes, for every published link: rdma_pma_route_hops{device,port,dst_lid} (cables crossed)
// when its route is known, else counts it in rdma_pma_route_unrouted_links{error}; with
// `route_links`, rdma_pma_route_link{device,port,dst_lid,hop,from,to} for each cable on it; the
// suspects rdma_pma_suspect_link{rail,from,to} (lossy flows explained) and
// rdma_pma_suspect_link_clean_flows{rail,from,to}, as the prober names its RoCE suspects; and
// rdma_pma_route_probe_links / rdma_pma_route_probe_links_dropped. Cardinality: docs/metrics.md.
void write_probe_routes(const Topology& topo, const ForwardingTables& t, const model::IbProbeLinksView& links,
                        bool route_links, exporter::MetricSink& out);

}  // namespace rdma::collectors::pma
