#include "collectors/netdev/link_metrics.h"

#include <utility>

#include "sources/sysfs/reader.h"

namespace rdma::collectors::netdev {
namespace {

using exporter::Labels;

Labels with(const Labels& base, const char* key, std::string value) {
  Labels l = base;
  l.emplace_back(key, std::move(value));
  return l;
}

struct FecFamily {
  const ethtool::FecCounter ethtool::FecState::*member;
  const char* total_name;
  const char* lane_name;
  const char* help;
};
constexpr FecFamily kFecFamilies[] = {
    {&ethtool::FecState::corrected_blocks, "rdma_netdev_fec_corrected_blocks_total",
     "rdma_netdev_fec_lane_corrected_blocks_total", "FEC blocks (codewords) received with errors the FEC corrected"},
    {&ethtool::FecState::uncorrectable_blocks, "rdma_netdev_fec_uncorrectable_blocks_total",
     "rdma_netdev_fec_lane_uncorrectable_blocks_total", "FEC blocks received with errors the FEC could not correct (the frame is lost)"},
    {&ethtool::FecState::corrected_bits, "rdma_netdev_fec_corrected_bits_total", "rdma_netdev_fec_lane_corrected_bits_total",
     "Bits the FEC corrected (pre-FEC bit errors)"},
};

}  // namespace

CarrierCounters read_carrier_counters(const std::string& sysfs_root, const std::string& netdev,
                                      const std::function<void(const std::string&, ReadError)>& on_error) {
  CarrierCounters c;
  const std::string dir = sysfs_root + "/class/net/" + netdev + "/";
  for (auto [file, member] : {std::pair{"carrier_changes", &CarrierCounters::changes},
                              {"carrier_up_count", &CarrierCounters::up},
                              {"carrier_down_count", &CarrierCounters::down}}) {
    auto v = sysfs::read_u64(dir + file);
    if (v) c.*member = v.value;
    else if (v.error != ReadError::kNotFound) on_error(dir + file, v.error);  // absent: an older kernel
  }
  return c;
}

void emit_carrier(const Labels& base, const CarrierCounters& c, exporter::MetricSink& out) {
  if (c.changes)
    out.counter("rdma_netdev_carrier_changes_total", "Times the netdev's carrier changed (class/net/<if>/carrier_changes).", base,
                *c.changes);
  if (c.up) out.counter("rdma_netdev_carrier_up_total", "Times the netdev's carrier came up (carrier_up_count).", base, *c.up);
  if (c.down)
    out.counter("rdma_netdev_carrier_down_total", "Times the netdev's carrier went down (carrier_down_count).", base, *c.down);
}

bool emit_linkstate(const Labels& base, const ethtool::LinkState& s, exporter::MetricSink& out) {
  if (s.link) out.gauge("rdma_netdev_link_up", "1 when the driver reports the link up (ethtool netlink LINKSTATE).", base, *s.link ? 1 : 0);
  if (s.sqi) out.gauge("rdma_netdev_link_sqi", "Signal quality index of the PHY (0 worst .. rdma_netdev_link_sqi_max).", base, *s.sqi);
  if (s.sqi_max) out.gauge("rdma_netdev_link_sqi_max", "Best signal quality index the PHY reports.", base, *s.sqi_max);
  if (s.ext_state) {
    Labels l = with(base, "reason", ethtool::ext_state_label(*s.ext_state));
    l.emplace_back("detail", ethtool::ext_substate_label(*s.ext_state, s.ext_substate.value_or(0)));
    out.info("rdma_netdev_link_down_reason_info",
             "Why the driver says the link is down (ethtool extended link state and substate; detail empty when none). Always 1; absent while up.",
             std::move(l));
  }
  if (s.down_count)
    out.counter("rdma_netdev_link_down_events_total", "Link down events the driver counted (ethtool link_down_events, else its ethtool -S).",
                base, *s.down_count);
  return s.down_count.has_value();
}

void emit_fec(const Labels& base, const ethtool::FecState& s, exporter::MetricSink& out) {
  if (s.active_mode_bit)
    out.info("rdma_netdev_fec_mode_info", "Active FEC mode of the link (none, rs, baser, llrs). Always 1.",
             with(base, "mode", ethtool::fec_mode_label(*s.active_mode_bit)));
  for (const auto& f : kFecFamilies) {
    const ethtool::FecCounter& c = s.*f.member;
    if (c.total) out.counter(f.total_name, std::string(f.help) + ".", base, *c.total);
    for (std::size_t i = 0; i < c.lanes.size(); ++i)
      out.counter(f.lane_name, std::string(f.help) + ", per lane.", with(base, "lane", std::to_string(i)), c.lanes[i]);
  }
  for (const auto& bin : s.histogram) {
    if (!bin.codewords) continue;
    std::string errors = std::to_string(bin.low);
    if (bin.high != bin.low) errors += "-" + std::to_string(bin.high);
    out.counter("rdma_netdev_fec_histogram_codewords_total",
                "Codewords received by how many bit errors the FEC corrected in each (bit_errors: a count or a range low-high).",
                with(base, "bit_errors", std::move(errors)), *bin.codewords);
  }
}

}  // namespace rdma::collectors::netdev
