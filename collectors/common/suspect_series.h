// The series of a set of suspect links (sources/model/suspect_links.h), one writer for the RoCE
// traces (rdma_prober_suspect_link) and the InfiniBand routes (rdma_pma_suspect_link): per suspect
// `<name>{rail,from,to}` = the lossy flows it explains and `<name>_clean_flows` beside it.
#pragma once

#include <string_view>
#include <vector>

#include "exporter/metrics.h"
#include "sources/model/suspect_links.h"

namespace rdma::collectors {

struct SuspectSeries {
  std::string_view name, help;      // <name>: the lossy flows explained
  std::string_view clean_name, clean_help;
};

void write_suspect_links(const std::vector<model::SuspectLink>& suspects, const SuspectSeries& series,
                         exporter::MetricSink& out);

}  // namespace rdma::collectors
