// Per-driver maps from ethtool statistic names to typed PFC/pause families, as data: one row per
// name pattern, `{p}` standing for a priority 0-7. Pure functions, tested on string tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::ethtool {

enum class Family : std::uint8_t {
  kPfcPauseFrames,       // per priority, rx/tx: PFC frames that pause the priority (XOFF)
  kPfcResumeFrames,      // per priority, rx/tx: PFC frames with quanta 0 (XON), drivers that split them
  kPfcPauseDuration,     // per priority, rx/tx, microseconds in the driver
  kPfcPauseTransitions,  // per priority, rx/tx: XON->XOFF transitions
  kPriorityDiscards,     // per priority, rx, qualifier = cause (buffer, congestion)
  kPriorityEcnMarked,    // per priority, rx: packets marked ECN-CE by the port
  kPauseStormEvents,     // qualifier = level (warning, error)
  kOutOfBuffer,          // receive queue had no software buffer
  kLinkPauseFrames,      // 802.3x global pause, rx/tx
  kLinkResumeFrames,     // 802.3x XON, rx/tx
  kLinkPauseDuration,    // 802.3x, rx/tx, microseconds
  kLinkPauseTransitions, // 802.3x, rx
  // The physical layer, where the driver's ethtool -S is the only source (`{p}` = lane 0-7):
  kPhyCorrectedBits,      // bits the FEC corrected (pre-FEC bit errors), rx
  kPhyLaneCorrectedBits,  // the same per lane
  kPhySymbolErrors,       // qualifier = where counted: pcs (after FEC: errors the FEC left), carrier (802.3)
  kPhyReceivedBits,       // bits received (the BER denominator where the driver gives it)
  kLinkDownEvents,        // the driver's link down count
};

struct StatRule {
  std::string_view driver;     // ETHTOOL_GDRVINFO driver name
  std::string_view pattern;    // statistic name, `{p}` = priority digit 0-7
  Family family;
  std::string_view direction;  // "rx", "tx" or ""
  std::string_view qualifier;  // cause/level or ""
  bool microseconds = false;   // value is in µs (exported in seconds)
};

struct MappedStat {
  std::size_t index = 0;  // position in the driver's string table
  Family family = Family::kOutOfBuffer;
  std::string_view direction;
  int priority = -1;  // -1 when the family has no priority
  std::string_view qualifier;
  bool microseconds = false;
};

// The built-in rules (mlx5_core, bnxt_en, ice).
std::span<const StatRule> builtin_rules();
// Drivers that have rules.
bool driver_known(std::string_view driver);
// Pure: matches `name` against `pattern`; sets *priority for `{p}` patterns.
bool match_pattern(std::string_view pattern, std::string_view name, int* priority);
// Pure: the statistics of `names` (a driver's string table) that the rules of `driver` type.
std::vector<MappedStat> map_stats(std::string_view driver, const std::vector<std::string>& names,
                                  std::span<const StatRule> rules = builtin_rules());

}  // namespace rdma::ethtool
