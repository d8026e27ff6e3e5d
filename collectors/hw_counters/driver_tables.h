// The drivers' hw_counters as data: which normalised metric each vendor counter feeds, which
// counters are really gauges, and which are narrower than 64 bits (wrap extension). One table
// per driver in driver_tables.cpp; docs/metrics.md lists the same rows and
// tests/hw_counters/driver_tables_test.cpp checks every one of them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace rdma::collectors::hw_counters {

// The vendor-independent metrics.
enum class Kind : std::uint8_t {
  kCnpSent,
  kCnpHandled,
  kCnpIgnored,
  kEcnMarkedPackets,
  kOutOfSequence,
  kPacketSeqErrNaks,
  kLocalAckTimeouts,
  kRetransmissions,
  kRnrNakRetries,
  kDuplicateRequests,
  kIcrcErrors,
  kReceiveDiscards,
  kTransmitDiscards,
  kOutOfBuffer,
  kTransmitPackets,
  kReceivePackets,
  kTransmitBytes,
  kReceiveBytes,
  kQpRetriesExceededTransport,
  kQpRetriesExceededRnr,
  kCount,
};

struct KindDef {
  Kind kind;
  std::string_view metric;  // full metric name (a counter, ends in _total)
  std::string_view help;
  // Several kinds may share one family, told apart by a `kind` label (retries exceeded:
  // "transport", "rnr"); empty for a family of its own.
  std::string_view kind_label = {};
};
const std::array<KindDef, static_cast<std::size_t>(Kind::kCount)>& kinds();
const KindDef& kind_def(Kind k);

// Where a source counter lives.
enum class Scope : std::uint8_t {
  kPort,    // ports/<n>/hw_counters (or the port's netlink counters)
  kDevice,  // <dev>/hw_counters; used for the port only when the device has exactly one port
};

// One way a driver provides a normalised metric: the sum of `counters` (all must be present).
// Several rows for one (driver, kind) are alternatives in priority order (kernel renames,
// netlink-only optional counters); the first row whose counters are all present wins.
struct MappingRow {
  Kind kind;
  Scope scope;
  std::array<std::string_view, 3> counters;  // unused entries empty
  std::string_view note;                     // shown in docs/metrics.md
};

struct DriverTable {
  std::string_view driver;  // as in model::DeviceModel::driver
  std::span<const MappingRow> rows;
  // The driver writes 2^64-1 for a value it could not decode (ionic: ionic_v1_stat_val() returns
  // ~0 for an unknown type or an offset outside the firmware's buffer): no sample, an error.
  bool all_ones_invalid = false;
  // Counter names and widths come from the firmware at run time and sysfs does not show the
  // width (ionic: 8, 16, 32 or 64 bits per counter): wraps are extended with the width inferred
  // from the values seen (WrapExtender::extend_inferred).
  bool runtime_widths = false;
};
// Every driver with a mapping (mlx5, bnxt_re, irdma, rxe, efa, mana, erdma, hns, ionic).
std::span<const DriverTable> driver_tables();
// The rows of one driver; empty for a driver without a table.
std::span<const MappingRow> mapping_for(std::string_view driver);
// The driver's table, nullptr for a driver without one.
const DriverTable* table_for(std::string_view driver);

// Driver counters that are gauges (levels, not event counts).
bool is_gauge(std::string_view driver, std::string_view counter);

// Bit width of a counter that wraps below 64 bits (mlx5 Q counters: 32), 64 otherwise (also for
// drivers with runtime_widths, whose widths the table cannot know).
std::uint8_t counter_width(std::string_view driver, std::string_view counter);

}  // namespace rdma::collectors::hw_counters
