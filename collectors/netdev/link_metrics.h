// The netdev collector's physical-layer samples (carrier counters, ethtool link state and FEC),
// as pure functions of decoded kernel data so that the fixture tests drive the scrape's code.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "exporter/metrics.h"
#include "sources/common/result.h"
#include "sources/ethtool/link_health.h"

namespace rdma::collectors::netdev {

// class/net/<if>/carrier_changes, carrier_up_count, carrier_down_count (kernel counters of the
// netdev's carrier going up and down; up/down since 4.16). Absent members: the file is absent.
struct CarrierCounters {
  std::optional<std::uint64_t> changes, up, down;
};
// Reads them under `sysfs_root`; `on_error(path, error)` for a file that exists but cannot be read.
CarrierCounters read_carrier_counters(const std::string& sysfs_root, const std::string& netdev,
                                      const std::function<void(const std::string&, ReadError)>& on_error);

// base = {device, port, netdev}.
void emit_carrier(const exporter::Labels& base, const CarrierCounters& c, exporter::MetricSink& out);
// Returns true when the kernel gave the link down count (the driver's own then is not exported).
bool emit_linkstate(const exporter::Labels& base, const ethtool::LinkState& s, exporter::MetricSink& out);
void emit_fec(const exporter::Labels& base, const ethtool::FecState& s, exporter::MetricSink& out);

}  // namespace rdma::collectors::netdev
