// The metric names and help of the PMA counters (sources/mad/pma_counters.h), for the two
// collectors that export them: port (rdma_port_<suffix>_total) and pma (rdma_pma_port_... and
// rdma_pma_fabric_port_...). It lives in collectors/common/ because a collector may not include
// another collector, and sources/ knows no Prometheus.
#pragma once

#include <string_view>

#include "sources/mad/pma_counters.h"

namespace rdma::collectors {

struct PmaCounterName {
  std::string_view suffix;  // metric name after the collector's prefix, without _total
  std::string_view help;
};

// The name and help of counter `id`.
const PmaCounterName& pma_counter_name(mad::PmaCounterId id);

}  // namespace rdma::collectors
