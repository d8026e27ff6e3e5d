// Typed samples of the netdev collector, as pure functions of decoded kernel data, so that the
// fixture tests drive exactly the code the scrape runs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exporter/metrics.h"
#include "sources/dcb/dcbnl.h"
#include "sources/dcb/ecn_sysfs.h"
#include "sources/ethtool/ethtool_netlink.h"
#include "sources/ethtool/stat_map.h"

namespace rdma::collectors::netdev {

using exporter::Labels;
using exporter::MetricSink;

// Statistics of the driver map. base = {device, port, netdev}. With skip_link_pause the
// driver's 802.3x pause frame counts are left out (the standard netlink statistics were exported),
// with skip_link_down its link down count (ethtool netlink gave it).
void emit_mapped(const Labels& base, std::span<const ethtool::MappedStat> mapped,
                 std::span<const std::uint64_t> values, bool skip_link_pause, MetricSink& out, bool skip_link_down = false);
// The allow-listed raw statistics: (index in the string table, name).
void emit_extra(const Labels& base, std::span<const std::pair<std::size_t, std::string>> extra,
                std::span<const std::uint64_t> values, MetricSink& out);
// Standard pause statistics; true when at least one value was exported.
bool emit_link_pause(const Labels& base, const ethtool::PauseStats& stats, MetricSink& out);
void emit_dcb(const Labels& base, const dcb::IeeeConfig& cfg, MetricSink& out);
void emit_ecn(const Labels& base, const dcb::EcnConfig& cfg, MetricSink& out);

// What the port's netdevs say about one priority: unknown, disabled, enabled, or absent (the
// driver has no interface for it at all: no ecn/ sysfs tree outside MLNX_OFED).
enum class Tri : std::uint8_t { kUnknown, kNo, kYes, kAbsent };
// Folds one netdev's answer into the port's: any "no" wins, then "yes", then unknown, then absent.
Tri fold(Tri port, Tri netdev);
// rdma_netdev_roce_priority_consistent{device,port,priority,reason}; returns the reason. 0 when
// something is off or unreadable; 1 for "ok", and for "ecn_not_exposed" (PFC on, and the driver
// has no ECN configuration to check: state of the host, not an inconsistency).
std::string_view emit_consistency(const Labels& port_base, int priority, Tri pfc, Tri ecn, MetricSink& out);

// The (index, name) pairs of `names` that are in `allow` (each allowed name once).
std::vector<std::pair<std::size_t, std::string>> select_extra(const std::vector<std::string>& names,
                                                              const std::vector<std::string>& allow);

}  // namespace rdma::collectors::netdev
