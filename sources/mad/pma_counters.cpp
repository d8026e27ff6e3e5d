#include "sources/mad/pma_counters.h"

#include <array>

namespace rdma::mad {
namespace {

// The narrow value of field F of the attribute held in PortReadings::*A.
template <auto A, auto F>
std::optional<std::uint64_t> from(const PortReadings& r) {
  const auto& attr = r.*A;
  if (!attr) return std::nullopt;
  return static_cast<std::uint64_t>((*attr).*F);
}
template <auto F>
constexpr auto pc = &from<&PortReadings::pc, F>;
template <auto F>
constexpr auto re = &from<&PortReadings::rcv_err, F>;
template <auto F>
constexpr auto xd = &from<&PortReadings::xmit_disc, F>;

using PC = PortCounters;
using EXT = PortCountersExtended;
using RE = PortRcvErrorDetails;
using XD = PortXmitDiscardDetails;
constexpr auto kPC = PmaAttr::kPortCounters;
constexpr auto kRE = PmaAttr::kPortRcvErrorDetails;
constexpr auto kXD = PmaAttr::kPortXmitDiscardDetails;
constexpr auto kExt = PmaAttr::kPortCountersExtended;
using Id = PmaCounterId;
// PortCountersExtended carries the data/packet counters in both of its forms, the
// uni/multicast ones only in the full (IETF) form.
constexpr std::uint16_t kAnyExt = kCapExtWidth | kCapExtWidthNoIetf;

// The kernel's counters/ files are those of PortCounters and PortCountersExtended
// (drivers/infiniband/core/sysfs.c), the data/packet ones taken from PortCountersExtended when
// ClassPortInfo announces it: the same choice pma_value makes.
constexpr std::array<PmaCounter, kPmaCounterCount> kCounters{{
    {Id::kSymbolErrorCounter, "symbol_error", kPC, 16, 1, 0, pc<&PC::symbol_errors>, nullptr, 0},
    {Id::kLinkErrorRecoveryCounter, "link_error_recovery", kPC, 8, 1, 0, pc<&PC::link_error_recovery>, nullptr, 0},
    {Id::kLinkDownedCounter, "link_downed", kPC, 8, 1, 0, pc<&PC::link_downed>, nullptr, 0},
    {Id::kPortRcvErrors, "port_rcv_errors", kPC, 16, 1, 0, pc<&PC::rcv_errors>, nullptr, 0},
    {Id::kPortRcvRemotePhysicalErrors, "port_rcv_remote_physical_errors", kPC, 16, 1, 0, pc<&PC::rcv_remote_physical_errors>, nullptr, 0},
    {Id::kPortRcvSwitchRelayErrors, "port_rcv_switch_relay_errors", kPC, 16, 1, 0, pc<&PC::rcv_switch_relay_errors>, nullptr, 0},
    {Id::kPortXmitDiscards, "port_xmit_discards", kPC, 16, 1, 0, pc<&PC::xmit_discards>, nullptr, 0},
    {Id::kPortXmitConstraintErrors, "port_xmit_constraint_errors", kPC, 8, 1, 0, pc<&PC::xmit_constraint_errors>, nullptr, 0},
    {Id::kPortRcvConstraintErrors, "port_rcv_constraint_errors", kPC, 8, 1, 0, pc<&PC::rcv_constraint_errors>, nullptr, 0},
    {Id::kLocalLinkIntegrityErrors, "local_link_integrity_errors", kPC, 4, 1, 0, pc<&PC::local_link_integrity_errors>, nullptr, 0},
    {Id::kExcessiveBufferOverrunErrors, "excessive_buffer_overrun_errors", kPC, 4, 1, 0, pc<&PC::excessive_buffer_overrun_errors>, nullptr, 0},
    {Id::kQP1Dropped, "", kPC, 16, 1, 0, pc<&PC::qp1_dropped>, nullptr, 0},
    {Id::kVL15Dropped, "VL15_dropped", kPC, 16, 1, 0, pc<&PC::vl15_dropped>, nullptr, 0},
    {Id::kPortXmitWait, "port_xmit_wait", kPC, 32, 1, kCapXmitWait, pc<&PC::xmit_wait>, nullptr, 0},
    {Id::kPortXmitData, "port_xmit_data", kPC, 32, 4, 0, pc<&PC::xmit_data>, &EXT::xmit_data, kAnyExt},
    {Id::kPortRcvData, "port_rcv_data", kPC, 32, 4, 0, pc<&PC::rcv_data>, &EXT::rcv_data, kAnyExt},
    {Id::kPortXmitPkts, "port_xmit_packets", kPC, 32, 1, 0, pc<&PC::xmit_pkts>, &EXT::xmit_pkts, kAnyExt},
    {Id::kPortRcvPkts, "port_rcv_packets", kPC, 32, 1, 0, pc<&PC::rcv_pkts>, &EXT::rcv_pkts, kAnyExt},
    {Id::kPortUnicastXmitPkts, "unicast_xmit_packets", kExt, 64, 1, 0, nullptr, &EXT::unicast_xmit_pkts, kCapExtWidth},
    {Id::kPortUnicastRcvPkts, "unicast_rcv_packets", kExt, 64, 1, 0, nullptr, &EXT::unicast_rcv_pkts, kCapExtWidth},
    {Id::kPortMulticastXmitPkts, "multicast_xmit_packets", kExt, 64, 1, 0, nullptr, &EXT::multicast_xmit_pkts, kCapExtWidth},
    {Id::kPortMulticastRcvPkts, "multicast_rcv_packets", kExt, 64, 1, 0, nullptr, &EXT::multicast_rcv_pkts, kCapExtWidth},
    {Id::kPortLocalPhysicalErrors, "", kRE, 16, 1, 0, re<&RE::local_physical_errors>, nullptr, 0},
    {Id::kPortMalformedPktErrors, "", kRE, 16, 1, 0, re<&RE::malformed_packet_errors>, nullptr, 0},
    {Id::kPortBufferOverrunErrors, "", kRE, 16, 1, 0, re<&RE::buffer_overrun_errors>, nullptr, 0},
    {Id::kPortDLIDMappingErrors, "", kRE, 16, 1, 0, re<&RE::dlid_mapping_errors>, nullptr, 0},
    {Id::kPortVLMappingErrors, "", kRE, 16, 1, 0, re<&RE::vl_mapping_errors>, nullptr, 0},
    {Id::kPortLoopingErrors, "", kRE, 16, 1, 0, re<&RE::looping_errors>, nullptr, 0},
    {Id::kPortInactiveDiscards, "", kXD, 16, 1, 0, xd<&XD::inactive_discards>, nullptr, 0},
    {Id::kPortNeighborMTUDiscards, "", kXD, 16, 1, 0, xd<&XD::neighbor_mtu_discards>, nullptr, 0},
    {Id::kPortSwLifetimeLimitDiscards, "", kXD, 16, 1, 0, xd<&XD::sw_lifetime_limit_discards>, nullptr, 0},
    {Id::kPortSwHOQLifetimeLimitDiscards, "", kXD, 16, 1, 0, xd<&XD::sw_hoq_lifetime_limit_discards>, nullptr, 0},
}};

// Row i is the counter with id i, so that a table indexed by PmaCounterId (the collectors' names)
// and this one cannot drift apart.
constexpr bool rows_in_id_order() {
  for (std::size_t i = 0; i < kCounters.size(); ++i)
    if (static_cast<std::size_t>(kCounters[i].id) != i) return false;
  return static_cast<std::size_t>(PmaCounterId::kPortSwHOQLifetimeLimitDiscards) + 1 == kPmaCounterCount;
}
static_assert(rows_in_id_order());

}  // namespace

std::span<const PmaCounter> pma_counters() { return kCounters; }

const PmaCounter* find_pma_counter_file(std::string_view file) {
  if (file.empty()) return nullptr;
  for (const auto& c : kCounters)
    if (c.sysfs_file == file) return &c;
  return nullptr;
}

std::optional<PmaValue> pma_value(const PmaCounter& c, const PortReadings& r) {
  if (c.cap && !(r.cap_mask & c.cap)) return std::nullopt;
  if (c.wide) {
    if (r.ext && (r.cap_mask & c.wide_cap)) return PmaValue{r.ext.value().*c.wide, 64};
    if (r.ext_failed) return std::nullopt;
  }
  if (!c.narrow) return std::nullopt;
  const auto v = c.narrow(r);
  if (!v) return std::nullopt;
  return PmaValue{*v, c.width};
}

bool store(PortReadings& r, PmaAttr attr, const PmaReply& reply) {
  const auto p = reply.payload();
  switch (attr) {
    case PmaAttr::kClassPortInfo: {
      auto c = decode_class_port_info(p);
      if (c) r.cap_mask = c->capability_mask;
      return c.has_value();
    }
    case PmaAttr::kPortCounters: return (r.pc = decode_port_counters(p)).has_value();
    case PmaAttr::kPortCountersExtended: return (r.ext = decode_port_counters_ext(p)).has_value();
    case PmaAttr::kPortRcvErrorDetails: return (r.rcv_err = decode_rcv_error_details(p)).has_value();
    case PmaAttr::kPortXmitDiscardDetails: return (r.xmit_disc = decode_xmit_discard_details(p)).has_value();
    case PmaAttr::kPortVLXmitWaitCounters: return (r.vl_wait = decode_vl_xmit_wait(p)).has_value();
    case PmaAttr::kPortExtendedSpeedsCounters:
      return (r.ext_speeds = decode_ext_speeds_counters(p, (r.cap_mask & kCapRsFec) != 0)).has_value();
  }
  return false;
}

}  // namespace rdma::mad
