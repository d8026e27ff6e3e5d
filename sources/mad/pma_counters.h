// The PMA counters as data: one row per counter that the port collector (from the kernel's
// counters/ files or from MADs) and the pma collector (from MADs) export, with its identity (the
// IBTA field), the kernel's file name, the widths and sources of its values and the capability
// bits that make them valid. Both collectors, and the decoder's tests, read this one table. The
// metric names and help are not here (sources/ knows no Prometheus): collectors/common/pma_names.h
// gives them per PmaCounterId.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "sources/mad/mad_client.h"
#include "sources/mad/pma_decode.h"
#include "sources/mad/smp_decode.h"

namespace rdma::mad {

// The decoded attributes of one port; absent attributes were not asked, refused or failed.
struct PortReadings {
  std::uint16_t cap_mask = 0;  // ClassPortInfo CapabilityMask
  // PortCountersExtended failed (not refused): the data/packet counters are left out rather than
  // taken from the 32-bit PortCounters (a jump down that Prometheus would read as a counter reset).
  bool ext_failed = false;
  std::optional<PortCounters> pc;
  std::optional<PortCountersExtended> ext;
  std::optional<PortRcvErrorDetails> rcv_err;
  std::optional<PortXmitDiscardDetails> xmit_disc;
  std::optional<PortVLXmitWait> vl_wait;
  std::optional<ExtSpeedsCounters> ext_speeds;  // RS-FEC form where cap_mask sets kCapRsFec
};

// Stores a successful reply's payload in `r`; false when it does not decode (malformed).
bool store(PortReadings& r, PmaAttr attr, const PmaReply& reply);

// One PMA counter, named after its IBTA field (PortCounters, PortCountersExtended,
// PortRcvErrorDetails, PortXmitDiscardDetails), in exposition order: pma_counters()[i].id == i.
enum class PmaCounterId : std::uint8_t {
  kSymbolErrorCounter,
  kLinkErrorRecoveryCounter,
  kLinkDownedCounter,
  kPortRcvErrors,
  kPortRcvRemotePhysicalErrors,
  kPortRcvSwitchRelayErrors,
  kPortXmitDiscards,
  kPortXmitConstraintErrors,
  kPortRcvConstraintErrors,
  kLocalLinkIntegrityErrors,
  kExcessiveBufferOverrunErrors,
  kQP1Dropped,
  kVL15Dropped,
  kPortXmitWait,
  kPortXmitData,
  kPortRcvData,
  kPortXmitPkts,
  kPortRcvPkts,
  kPortUnicastXmitPkts,
  kPortUnicastRcvPkts,
  kPortMulticastXmitPkts,
  kPortMulticastRcvPkts,
  kPortLocalPhysicalErrors,
  kPortMalformedPktErrors,
  kPortBufferOverrunErrors,
  kPortDLIDMappingErrors,
  kPortVLMappingErrors,
  kPortLoopingErrors,
  kPortInactiveDiscards,
  kPortNeighborMTUDiscards,
  kPortSwLifetimeLimitDiscards,
  kPortSwHOQLifetimeLimitDiscards,
};
inline constexpr std::size_t kPmaCounterCount = 32;

struct PmaCounter {
  PmaCounterId id;
  std::string_view sysfs_file;  // the kernel's ports/N/counters/<file>; "" when the kernel has none
  PmaAttr attr;                 // the attribute of the narrow value (PortCountersExtended: only wide)
  std::uint8_t width;           // bits of the narrow value; 64 when there is only the wide one
  std::uint8_t scale;           // 4: data in 4-octet words, exported in bytes
  std::uint16_t cap;            // CapabilityMask bit without which the counter is not valid; 0: none
  // The narrow (<= 32-bit, saturating) value; nullptr when the counter has none.
  std::optional<std::uint64_t> (*narrow)(const PortReadings&);
  // The 64-bit value in PortCountersExtended, valid when one of `wide_cap`'s bits is set.
  std::uint64_t PortCountersExtended::*wide;
  std::uint16_t wide_cap;
};

// Every row, in exposition order.
std::span<const PmaCounter> pma_counters();
// The row whose sysfs_file is `file`; nullptr when none.
const PmaCounter* find_pma_counter_file(std::string_view file);

struct PmaValue {
  std::uint64_t raw;  // as the attribute carries it (before `scale`)
  std::uint8_t width;
};
// The counter's value in `r`: the 64-bit one where PortCountersExtended has it, else the narrow
// one (not when PortCountersExtended failed: see PortReadings::ext_failed); nullopt when `r`
// has neither or the capability mask says it is not valid.
std::optional<PmaValue> pma_value(const PmaCounter& c, const PortReadings& r);

inline bool saturated(const PmaValue& v) { return v.width < 64 && v.raw >= (std::uint64_t{1} << v.width) - 1; }

}  // namespace rdma::mad
