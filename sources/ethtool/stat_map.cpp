#include "sources/ethtool/stat_map.h"

#include <array>

namespace rdma::ethtool {
namespace {

using F = Family;

// mlx5: drivers/net/ethernet/mellanox/mlx5/core/en_stats.c (pport_per_prio_pfc_stats_desc with
// "global"/"prio{i}", pport_pfc_stall_stats_desc, pport_per_tc_prio/_congest_prio, vport q
// counter rx_out_of_buffer). bnxt_en: bnxt_ethtool.c port stats and rx/tx_port_stats_ext PFC
// entries. ice: ice_ethtool.c per-priority xon/xoff and link_xon/xoff ".nic" port stats.
constexpr std::array kRules{
    StatRule{"mlx5_core", "rx_prio{p}_pause", F::kPfcPauseFrames, "rx", ""},
    StatRule{"mlx5_core", "tx_prio{p}_pause", F::kPfcPauseFrames, "tx", ""},
    StatRule{"mlx5_core", "rx_prio{p}_pause_duration", F::kPfcPauseDuration, "rx", "", true},
    StatRule{"mlx5_core", "tx_prio{p}_pause_duration", F::kPfcPauseDuration, "tx", "", true},
    StatRule{"mlx5_core", "rx_prio{p}_pause_transition", F::kPfcPauseTransitions, "rx", ""},
    StatRule{"mlx5_core", "rx_prio{p}_buf_discard", F::kPriorityDiscards, "rx", "buffer"},
    StatRule{"mlx5_core", "rx_prio{p}_cong_discard", F::kPriorityDiscards, "rx", "congestion"},
    StatRule{"mlx5_core", "rx_prio{p}_marked", F::kPriorityEcnMarked, "rx", ""},
    StatRule{"mlx5_core", "tx_pause_storm_warning_events", F::kPauseStormEvents, "tx", "warning"},
    StatRule{"mlx5_core", "tx_pause_storm_error_events", F::kPauseStormEvents, "tx", "error"},
    StatRule{"mlx5_core", "rx_out_of_buffer", F::kOutOfBuffer, "rx", ""},
    StatRule{"mlx5_core", "rx_global_pause", F::kLinkPauseFrames, "rx", ""},
    StatRule{"mlx5_core", "tx_global_pause", F::kLinkPauseFrames, "tx", ""},
    StatRule{"mlx5_core", "rx_global_pause_duration", F::kLinkPauseDuration, "rx", "", true},
    StatRule{"mlx5_core", "tx_global_pause_duration", F::kLinkPauseDuration, "tx", "", true},
    StatRule{"mlx5_core", "rx_global_pause_transition", F::kLinkPauseTransitions, "rx", ""},

    // mlx5 PPCNT physical layer statistical group (en_stats.c pport_phy_statistical_stats_desc,
    // _err_lanes_stats_desc) and the 802.3 symbol errors.
    StatRule{"mlx5_core", "rx_corrected_bits_phy", F::kPhyCorrectedBits, "rx", ""},
    StatRule{"mlx5_core", "rx_err_lane_{p}_phy", F::kPhyLaneCorrectedBits, "rx", ""},
    StatRule{"mlx5_core", "rx_pcs_symbol_err_phy", F::kPhySymbolErrors, "rx", "pcs"},
    StatRule{"mlx5_core", "rx_symbol_err_phy", F::kPhySymbolErrors, "rx", "carrier"},

    StatRule{"bnxt_en", "rx_pfc_ena_frames_pri{p}", F::kPfcPauseFrames, "rx", ""},
    StatRule{"bnxt_en", "tx_pfc_ena_frames_pri{p}", F::kPfcPauseFrames, "tx", ""},
    StatRule{"bnxt_en", "pfc_pri{p}_rx_duration_us", F::kPfcPauseDuration, "rx", "", true},
    StatRule{"bnxt_en", "pfc_pri{p}_tx_duration_us", F::kPfcPauseDuration, "tx", "", true},
    StatRule{"bnxt_en", "pfc_pri{p}_rx_transitions", F::kPfcPauseTransitions, "rx", ""},
    StatRule{"bnxt_en", "pfc_pri{p}_tx_transitions", F::kPfcPauseTransitions, "tx", ""},
    StatRule{"bnxt_en", "rx_pause_frames", F::kLinkPauseFrames, "rx", ""},
    StatRule{"bnxt_en", "tx_pause_frames", F::kLinkPauseFrames, "tx", ""},
    // bnxt_ethtool.c bnxt_port_stats_ext_arr (rx_port_stats_ext).
    StatRule{"bnxt_en", "rx_corrected_bits", F::kPhyCorrectedBits, "rx", ""},
    StatRule{"bnxt_en", "rx_pcs_symbol_err", F::kPhySymbolErrors, "rx", "pcs"},
    StatRule{"bnxt_en", "rx_bits", F::kPhyReceivedBits, "rx", ""},
    StatRule{"bnxt_en", "link_down_events", F::kLinkDownEvents, "", ""},

    StatRule{"ice", "rx_priority_{p}_xoff.nic", F::kPfcPauseFrames, "rx", ""},
    StatRule{"ice", "tx_priority_{p}_xoff.nic", F::kPfcPauseFrames, "tx", ""},
    StatRule{"ice", "rx_priority_{p}_xon.nic", F::kPfcResumeFrames, "rx", ""},
    StatRule{"ice", "tx_priority_{p}_xon.nic", F::kPfcResumeFrames, "tx", ""},
    StatRule{"ice", "link_xoff_rx.nic", F::kLinkPauseFrames, "rx", ""},
    StatRule{"ice", "link_xoff_tx.nic", F::kLinkPauseFrames, "tx", ""},
    StatRule{"ice", "link_xon_rx.nic", F::kLinkResumeFrames, "rx", ""},
    StatRule{"ice", "link_xon_tx.nic", F::kLinkResumeFrames, "tx", ""},
};

}  // namespace

std::span<const StatRule> builtin_rules() { return kRules; }

bool driver_known(std::string_view driver) {
  for (const auto& r : kRules)
    if (r.driver == driver) return true;
  return false;
}

bool match_pattern(std::string_view pattern, std::string_view name, int* priority) {
  const auto at = pattern.find("{p}");
  if (at == std::string_view::npos) return pattern == name;
  const std::string_view head = pattern.substr(0, at), tail = pattern.substr(at + 3);
  if (name.size() != head.size() + 1 + tail.size() || !name.starts_with(head) || !name.ends_with(tail)) return false;
  const char d = name[head.size()];
  if (d < '0' || d > '7') return false;
  if (priority) *priority = d - '0';
  return true;
}

std::vector<MappedStat> map_stats(std::string_view driver, const std::vector<std::string>& names,
                                  std::span<const StatRule> rules) {
  std::vector<MappedStat> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (const auto& r : rules) {
      int prio = -1;
      if (r.driver != driver || !match_pattern(r.pattern, names[i], &prio)) continue;
      out.push_back(MappedStat{i, r.family, r.direction, prio, r.qualifier, r.microseconds});
      break;
    }
  }
  return out;
}

}  // namespace rdma::ethtool
