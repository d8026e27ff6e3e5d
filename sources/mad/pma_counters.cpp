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
// PortCountersExtended carries the data/packet counters in both of its forms, the
// uni/multicast ones only in the full (IETF) form.
constexpr std::uint16_t kAnyExt = kCapExtWidth | kCapExtWidthNoIetf;

// The kernel's counters/ files are those of PortCounters and PortCountersExtended
// (drivers/infiniband/core/sysfs.c), the data/packet ones taken from PortCountersExtended when
// ClassPortInfo announces it: the same choice pma_value makes.
constexpr std::array<PmaCounter, 32> kCounters{{
    {"symbol_errors", "symbol_error", "Minor link errors detected on one or more physical lanes (PMA SymbolErrorCounter, 16-bit).", kPC, 16, 1, 0, pc<&PC::symbol_errors>, nullptr, 0},
    {"link_error_recovery", "link_error_recovery", "Successful link error recovery processes (PMA LinkErrorRecoveryCounter, 8-bit).", kPC, 8, 1, 0, pc<&PC::link_error_recovery>, nullptr, 0},
    {"link_downed", "link_downed", "Times the link error recovery failed and the link went down (PMA LinkDownedCounter, 8-bit).", kPC, 8, 1, 0, pc<&PC::link_downed>, nullptr, 0},
    {"receive_errors", "port_rcv_errors", "Packets received with errors (PMA PortRcvErrors, 16-bit).", kPC, 16, 1, 0, pc<&PC::rcv_errors>, nullptr, 0},
    {"receive_remote_physical_errors", "port_rcv_remote_physical_errors", "Packets received marked with the EBP delimiter (PMA PortRcvRemotePhysicalErrors, 16-bit).", kPC, 16, 1, 0, pc<&PC::rcv_remote_physical_errors>, nullptr, 0},
    {"receive_switch_relay_errors", "port_rcv_switch_relay_errors", "Packets discarded because they could not be forwarded by the switch relay (PMA PortRcvSwitchRelayErrors, 16-bit).", kPC, 16, 1, 0, pc<&PC::rcv_switch_relay_errors>, nullptr, 0},
    {"transmit_discards", "port_xmit_discards", "Outbound packets discarded because the port was down or congested (PMA PortXmitDiscards, 16-bit).", kPC, 16, 1, 0, pc<&PC::xmit_discards>, nullptr, 0},
    {"transmit_constraint_errors", "port_xmit_constraint_errors", "Packets not transmitted due to outbound raw filtering or partition enforcement (PMA PortXmitConstraintErrors, 8-bit).", kPC, 8, 1, 0, pc<&PC::xmit_constraint_errors>, nullptr, 0},
    {"receive_constraint_errors", "port_rcv_constraint_errors", "Packets discarded due to inbound raw filtering or partition enforcement (PMA PortRcvConstraintErrors, 8-bit).", kPC, 8, 1, 0, pc<&PC::rcv_constraint_errors>, nullptr, 0},
    {"local_link_integrity_errors", "local_link_integrity_errors", "Times the local physical errors exceeded the threshold (PMA LocalLinkIntegrityErrors, 4-bit).", kPC, 4, 1, 0, pc<&PC::local_link_integrity_errors>, nullptr, 0},
    {"excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors", "Consecutive flow-control update periods with buffer overrun (PMA ExcessiveBufferOverrunErrors, 4-bit).", kPC, 4, 1, 0, pc<&PC::excessive_buffer_overrun_errors>, nullptr, 0},
    {"qp1_dropped", "", "QP1 MADs dropped (PMA QP1Dropped, 16-bit).", kPC, 16, 1, 0, pc<&PC::qp1_dropped>, nullptr, 0},
    {"vl15_dropped", "VL15_dropped", "Incoming VL15 (subnet management) packets dropped for lack of buffers (PMA VL15Dropped, 16-bit).", kPC, 16, 1, 0, pc<&PC::vl15_dropped>, nullptr, 0},
    {"transmit_wait", "port_xmit_wait", "Ticks during which the port had data to send but no flow-control credits (PMA PortXmitWait, 32-bit).", kPC, 32, 1, kCapXmitWait, pc<&PC::xmit_wait>, nullptr, 0},
    {"transmit_bytes", "port_xmit_data", "Bytes transmitted on all VLs (PMA PortXmitData, 4-octet words x 4; 64-bit PortCountersExtended where the port has it, else 32-bit).", kPC, 32, 4, 0, pc<&PC::xmit_data>, &EXT::xmit_data, kAnyExt},
    {"receive_bytes", "port_rcv_data", "Bytes received on all VLs (PMA PortRcvData, 4-octet words x 4; 64-bit PortCountersExtended where the port has it, else 32-bit).", kPC, 32, 4, 0, pc<&PC::rcv_data>, &EXT::rcv_data, kAnyExt},
    {"transmit_packets", "port_xmit_packets", "Packets transmitted on all VLs (PMA PortXmitPkts; 64-bit PortCountersExtended where the port has it, else 32-bit).", kPC, 32, 1, 0, pc<&PC::xmit_pkts>, &EXT::xmit_pkts, kAnyExt},
    {"receive_packets", "port_rcv_packets", "Packets received on all VLs (PMA PortRcvPkts; 64-bit PortCountersExtended where the port has it, else 32-bit).", kPC, 32, 1, 0, pc<&PC::rcv_pkts>, &EXT::rcv_pkts, kAnyExt},
    {"unicast_transmit_packets", "unicast_xmit_packets", "Unicast packets transmitted (PMA PortUnicastXmitPkts, PortCountersExtended).", kExt, 64, 1, 0, nullptr, &EXT::unicast_xmit_pkts, kCapExtWidth},
    {"unicast_receive_packets", "unicast_rcv_packets", "Unicast packets received (PMA PortUnicastRcvPkts, PortCountersExtended).", kExt, 64, 1, 0, nullptr, &EXT::unicast_rcv_pkts, kCapExtWidth},
    {"multicast_transmit_packets", "multicast_xmit_packets", "Multicast packets transmitted (PMA PortMulticastXmitPkts, PortCountersExtended).", kExt, 64, 1, 0, nullptr, &EXT::multicast_xmit_pkts, kCapExtWidth},
    {"multicast_receive_packets", "multicast_rcv_packets", "Multicast packets received (PMA PortMulticastRcvPkts, PortCountersExtended).", kExt, 64, 1, 0, nullptr, &EXT::multicast_rcv_pkts, kCapExtWidth},
    {"receive_local_physical_errors", "", "Receive errors: local physical errors (PortRcvErrorDetails, 16-bit).", kRE, 16, 1, 0, re<&RE::local_physical_errors>, nullptr, 0},
    {"receive_malformed_packet_errors", "", "Receive errors: malformed packets (PortRcvErrorDetails, 16-bit).", kRE, 16, 1, 0, re<&RE::malformed_packet_errors>, nullptr, 0},
    {"receive_buffer_overrun_errors", "", "Receive errors: buffer overruns (PortRcvErrorDetails, 16-bit).", kRE, 16, 1, 0, re<&RE::buffer_overrun_errors>, nullptr, 0},
    {"receive_dlid_mapping_errors", "", "Receive errors: DLID mapping (PortRcvErrorDetails, 16-bit).", kRE, 16, 1, 0, re<&RE::dlid_mapping_errors>, nullptr, 0},
    {"receive_vl_mapping_errors", "", "Receive errors: VL mapping (PortRcvErrorDetails, 16-bit).", kRE, 16, 1, 0, re<&RE::vl_mapping_errors>, nullptr, 0},
    {"receive_looping_errors", "", "Receive errors: looping (PortRcvErrorDetails, 16-bit).", kRE, 16, 1, 0, re<&RE::looping_errors>, nullptr, 0},
    {"transmit_inactive_discards", "", "Transmit discards: port inactive (PortXmitDiscardDetails, 16-bit).", kXD, 16, 1, 0, xd<&XD::inactive_discards>, nullptr, 0},
    {"transmit_neighbor_mtu_discards", "", "Transmit discards: neighbor MTU exceeded (PortXmitDiscardDetails, 16-bit).", kXD, 16, 1, 0, xd<&XD::neighbor_mtu_discards>, nullptr, 0},
    {"transmit_sw_lifetime_limit_discards", "", "Transmit discards: switch lifetime limit (PortXmitDiscardDetails, 16-bit).", kXD, 16, 1, 0, xd<&XD::sw_lifetime_limit_discards>, nullptr, 0},
    {"transmit_sw_hoq_lifetime_limit_discards", "", "Transmit discards: switch head-of-queue lifetime limit (PortXmitDiscardDetails, 16-bit).", kXD, 16, 1, 0, xd<&XD::sw_hoq_lifetime_limit_discards>, nullptr, 0},
}};

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
