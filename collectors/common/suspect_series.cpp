#include "collectors/common/suspect_series.h"

namespace rdma::collectors {

void write_suspect_links(const std::vector<model::SuspectLink>& suspects, const SuspectSeries& series,
                         exporter::MetricSink& out) {
  for (const model::SuspectLink& s : suspects) {
    exporter::Labels labels{{"rail", s.group}, {"from", s.link.from}, {"to", s.link.to}};
    out.gauge_u64(series.name, series.help, labels, s.lossy_flows);
    out.gauge_u64(series.clean_name, series.clean_help, std::move(labels), s.clean_flows);
  }
}

}  // namespace rdma::collectors
