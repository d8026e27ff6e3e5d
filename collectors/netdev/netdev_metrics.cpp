#include "collectors/netdev/netdev_metrics.h"

#include <array>
#include <set>
#include <tuple>

namespace rdma::collectors::netdev {
namespace {

using ethtool::Family;

struct FamilyDef {
  Family family;
  const char* name;
  const char* help;
  bool direction;
  bool priority;
  const char* qualifier_key;  // "" = none
  bool lane = false;          // `{p}` of the rule is a lane (label lane), not a priority
};

constexpr std::array kFamilies{
    FamilyDef{Family::kPfcPauseFrames, "rdma_netdev_pfc_pause_frames_total",
              "PFC pause (XOFF) frames per priority, received (rx) or sent (tx), from the driver's ethtool statistics.", true, true, ""},
    FamilyDef{Family::kPfcResumeFrames, "rdma_netdev_pfc_resume_frames_total",
              "PFC resume (XON) frames per priority, for drivers that count them apart (ice).", true, true, ""},
    FamilyDef{Family::kPfcPauseDuration, "rdma_netdev_pfc_pause_duration_seconds_total",
              "Time the priority was paused (rx: by the peer; tx: the peer by us), in seconds.", true, true, ""},
    FamilyDef{Family::kPfcPauseTransitions, "rdma_netdev_pfc_pause_transitions_total",
              "XON to XOFF transitions of the priority.", true, true, ""},
    FamilyDef{Family::kPriorityDiscards, "rdma_netdev_priority_discards_total",
              "Packets of the priority dropped by the port, by cause (buffer: no receive buffer; congestion: WRED).", true, true, "cause"},
    FamilyDef{Family::kPriorityEcnMarked, "rdma_netdev_priority_ecn_marked_packets_total",
              "Packets of the priority the port marked ECN-CE.", true, true, ""},
    FamilyDef{Family::kPauseStormEvents, "rdma_netdev_pause_storm_events_total",
              "Pause storm detections: warning (pausing for long), error (storm prevention stopped sending pause frames; drops possible).", true, false, "level"},
    FamilyDef{Family::kOutOfBuffer, "rdma_netdev_out_of_buffer_total",
              "Packets dropped because a receive queue had no software buffer.", false, false, ""},
    FamilyDef{Family::kLinkPauseFrames, "rdma_netdev_link_pause_frames_total",
              "IEEE 802.3x link-level pause frames (ethtool netlink standard statistics, else the driver's).", true, false, ""},
    FamilyDef{Family::kLinkResumeFrames, "rdma_netdev_link_resume_frames_total",
              "IEEE 802.3x link-level XON frames, for drivers that count them apart.", true, false, ""},
    FamilyDef{Family::kLinkPauseDuration, "rdma_netdev_link_pause_duration_seconds_total",
              "Time the link was paused by 802.3x pause, in seconds.", true, false, ""},
    FamilyDef{Family::kLinkPauseTransitions, "rdma_netdev_link_pause_transitions_total",
              "XON to XOFF transitions of 802.3x link-level pause.", true, false, ""},
    FamilyDef{Family::kPhyCorrectedBits, "rdma_netdev_phy_corrected_bits_total",
              "Bits the FEC corrected (pre-FEC bit errors), from the driver's physical layer statistics (ethtool -S).", false, false, ""},
    FamilyDef{Family::kPhyLaneCorrectedBits, "rdma_netdev_phy_lane_corrected_bits_total",
              "Bits the FEC corrected per lane, from the driver's physical layer statistics.", false, false, "", true},
    FamilyDef{Family::kPhySymbolErrors, "rdma_netdev_phy_symbol_errors_total",
              "Symbol errors from the driver's physical layer statistics: where=pcs after the FEC (what it left uncorrected), carrier (802.3 symbol errors during carrier).",
              false, false, "where"},
    FamilyDef{Family::kPhyReceivedBits, "rdma_netdev_phy_received_bits_total",
              "Bits received by the PHY, from the driver's statistics (the denominator of the bit error rate).", false, false, ""},
    FamilyDef{Family::kLinkDownEvents, "rdma_netdev_link_down_events_total",
              "Link down events the driver counted (ethtool link_down_events, else its ethtool -S).", false, false, ""},
};

const FamilyDef& def_of(Family f) {
  for (const auto& d : kFamilies)
    if (d.family == f) return d;
  return kFamilies.back();  // unreachable: every Family has a row
}

Labels with(const Labels& base, std::initializer_list<std::pair<const char*, std::string>> extra) {
  Labels l = base;
  for (const auto& [k, v] : extra) l.emplace_back(k, v);
  return l;
}


}  // namespace

void emit_mapped(const Labels& base, std::span<const ethtool::MappedStat> mapped, std::span<const std::uint64_t> values,
                 bool skip_link_pause, MetricSink& out, bool skip_link_down) {
  std::set<std::tuple<Family, std::string_view, int, std::string_view>> seen;  // a name twice in a table
  for (const auto& m : mapped) {
    if (m.index >= values.size()) continue;
    if (skip_link_pause && m.family == Family::kLinkPauseFrames) continue;
    if (skip_link_down && m.family == Family::kLinkDownEvents) continue;
    if (!seen.emplace(m.family, m.direction, m.priority, m.qualifier).second) continue;
    const FamilyDef& d = def_of(m.family);
    Labels l = base;
    if (d.direction) l.emplace_back("direction", std::string(m.direction));
    if (d.priority) l.emplace_back("priority", std::to_string(m.priority));
    if (d.lane) l.emplace_back("lane", std::to_string(m.priority));
    if (*d.qualifier_key) l.emplace_back(d.qualifier_key, std::string(m.qualifier));
    const std::uint64_t v = values[m.index];
    if (m.microseconds) out.add(d.name, exporter::MetricType::kCounter, d.help, std::move(l), static_cast<double>(v) / 1e6);
    else out.counter(d.name, d.help, std::move(l), v);
  }
}

void emit_extra(const Labels& base, std::span<const std::pair<std::size_t, std::string>> extra,
                std::span<const std::uint64_t> values, MetricSink& out) {
  for (const auto& [index, name] : extra) {
    if (index >= values.size()) continue;
    out.gauge_u64("rdma_netdev_ethtool_stat",
                  "ethtool statistic named in --collector.netdev.extra-stats, exported as the driver reports it (type unknown to the exporter).",
                  with(base, {{"stat", name}}), values[index]);
  }
}

bool emit_link_pause(const Labels& base, const ethtool::PauseStats& stats, MetricSink& out) {
  const FamilyDef& d = def_of(Family::kLinkPauseFrames);
  bool any = false;
  for (auto [dir, v] : {std::pair{"rx", stats.rx_frames}, {"tx", stats.tx_frames}}) {
    if (!v) continue;
    out.counter(d.name, d.help, with(base, {{"direction", dir}}), *v);
    any = true;
  }
  return any;
}

void emit_dcb(const Labels& base, const dcb::IeeeConfig& cfg, MetricSink& out) {
  if (cfg.dcbx)
    out.gauge("rdma_netdev_dcb_dcbx_mode", "DCBX mode bits (DCB_CAP_DCBX_*): 1 host, 2 LLD-managed, 4 CEE, 8 IEEE, 16 static.",
              base, *cfg.dcbx);
  if (cfg.pfc) {
    const auto& p = *cfg.pfc;
    out.gauge("rdma_netdev_dcb_pfc_capability", "Traffic classes that can do PFC at once (pfc_cap).", base, p.capability);
    for (int i = 0; i < dcb::kPriorities; ++i) {
      const std::string prio = std::to_string(i);
      out.gauge("rdma_netdev_dcb_pfc_enabled", "1 when PFC is enabled for the priority (IEEE pfc_en).",
                with(base, {{"priority", prio}}), p.enabled(i) ? 1 : 0);
      out.counter("rdma_netdev_dcb_pfc_frames_total",
                  "PFC frames per priority from dcbnl: tx = requests (sent), rx = indications (received).",
                  with(base, {{"direction", "tx"}, {"priority", prio}}), p.requests[i]);
      out.counter("rdma_netdev_dcb_pfc_frames_total",
                  "PFC frames per priority from dcbnl: tx = requests (sent), rx = indications (received).",
                  with(base, {{"direction", "rx"}, {"priority", prio}}), p.indications[i]);
    }
  }
  if (cfg.ets) {
    const auto& e = *cfg.ets;
    out.gauge("rdma_netdev_dcb_ets_willing", "1 when the port accepts the peer's ETS configuration.", base, e.willing);
    for (int i = 0; i < dcb::kPriorities; ++i) {
      const std::string n = std::to_string(i);
      out.gauge("rdma_netdev_dcb_ets_priority_tc", "Traffic class the priority is mapped to (ETS prio_tc).",
                with(base, {{"priority", n}}), e.priority_tc[i]);
      out.gauge("rdma_netdev_dcb_ets_tc_bandwidth_percent", "Transmit bandwidth share of the traffic class (ETS tc_tx_bw).",
                with(base, {{"tc", n}}), e.tc_tx_bandwidth[i]);
      out.info("rdma_netdev_dcb_ets_tc_algorithm_info", "Transmission selection algorithm of the traffic class. Always 1.",
               with(base, {{"tc", n}, {"algorithm", std::string(dcb::tsa_label(e.tc_tsa[i]))}}));
    }
  }
  std::set<std::tuple<std::uint8_t, std::uint16_t, std::uint8_t>> seen;
  for (const auto& a : cfg.apps) {
    if (!seen.emplace(a.selector, a.protocol, a.priority).second) continue;
    std::string sel(dcb::selector_label(a.selector));
    if (sel == "other") sel += "_" + std::to_string(a.selector);
    out.info("rdma_netdev_dcb_app_info",
             "DCB APP table entry: traffic matching selector/protocol (a DSCP value, UDP port, ethertype) gets the priority. Always 1.",
             with(base, {{"selector", sel}, {"protocol", std::to_string(a.protocol)}, {"priority", std::to_string(a.priority)}}));
  }
  out.info("rdma_netdev_dcb_trust_info",
           "Packet field the priority is taken from: dscp when the APP table maps DSCP values, else pcp. Always 1.",
           with(base, {{"trust", std::string(cfg.trust())}}));
}

void emit_ecn(const Labels& base, const dcb::EcnConfig& cfg, MetricSink& out) {
  for (auto [role, r] : {std::pair{"np", &cfg.np}, {"rp", &cfg.rp}}) {
    if (!r->present) continue;
    for (int p = 0; p < 8; ++p)
      if (r->enabled[p] >= 0)
        out.gauge("rdma_netdev_ecn_enabled",
                  "1 when RoCE ECN is enabled for the priority: np = notification point (sends CNPs), rp = reaction point (DCQCN rate control).",
                  with(base, {{"role", role}, {"priority", std::to_string(p)}}), r->enabled[p]);
    for (const auto& [name, v] : r->parameters)
      out.gauge_u64("rdma_netdev_dcqcn_parameter", "DCQCN parameter file under ecn/roce_np or ecn/roce_rp, as the driver reports it.",
                    with(base, {{"role", role}, {"parameter", name}}), v);
  }
}

Tri fold(Tri port, Tri netdev) {
  if (port == Tri::kNo || netdev == Tri::kNo) return Tri::kNo;
  if (port == Tri::kYes || netdev == Tri::kYes) return Tri::kYes;
  if (port == Tri::kUnknown || netdev == Tri::kUnknown) return Tri::kUnknown;
  return Tri::kAbsent;
}

std::string_view emit_consistency(const Labels& port_base, int priority, Tri pfc, Tri ecn, MetricSink& out) {
  std::string_view reason = "ok";
  if (pfc == Tri::kNo) reason = "pfc_disabled";
  else if (ecn == Tri::kNo) reason = "ecn_disabled";
  else if (pfc == Tri::kUnknown) reason = "pfc_unknown";
  else if (ecn == Tri::kUnknown) reason = "ecn_unknown";
  else if (ecn == Tri::kAbsent) reason = "ecn_not_exposed";
  out.gauge("rdma_netdev_roce_priority_consistent",
            "1 when the RoCE priority has PFC and ECN enabled on the port's netdevs (or PFC, where the driver exposes no "
            "ECN configuration: reason ecn_not_exposed); else 0 and reason says what is off or unreadable.",
            with(port_base, {{"priority", std::to_string(priority)}, {"reason", std::string(reason)}}),
            reason == "ok" || reason == "ecn_not_exposed" ? 1 : 0);
  return reason;
}

std::vector<std::pair<std::size_t, std::string>> select_extra(const std::vector<std::string>& names,
                                                              const std::vector<std::string>& allow) {
  std::vector<std::pair<std::size_t, std::string>> out;
  std::set<std::string_view> taken;
  for (std::size_t i = 0; i < names.size(); ++i)
    for (const auto& a : allow)
      if (names[i] == a && taken.insert(a).second) out.emplace_back(i, names[i]);
  return out;
}

}  // namespace rdma::collectors::netdev
