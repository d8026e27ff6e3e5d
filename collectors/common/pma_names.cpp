#include "collectors/common/pma_names.h"

#include <array>

namespace rdma::collectors {
namespace {

// Indexed by mad::PmaCounterId (the IBTA field in each row's comment), in its order.
constexpr std::array<PmaCounterName, mad::kPmaCounterCount> kNames{{
    {"symbol_errors", "Minor link errors detected on one or more physical lanes (PMA SymbolErrorCounter, 16-bit)."},  // SymbolErrorCounter
    {"link_error_recovery", "Successful link error recovery processes (PMA LinkErrorRecoveryCounter, 8-bit)."},  // LinkErrorRecoveryCounter
    {"link_downed", "Times the link error recovery failed and the link went down (PMA LinkDownedCounter, 8-bit)."},  // LinkDownedCounter
    {"receive_errors", "Packets received with errors (PMA PortRcvErrors, 16-bit)."},  // PortRcvErrors
    {"receive_remote_physical_errors", "Packets received marked with the EBP delimiter (PMA PortRcvRemotePhysicalErrors, 16-bit)."},  // PortRcvRemotePhysicalErrors
    {"receive_switch_relay_errors", "Packets discarded because they could not be forwarded by the switch relay (PMA PortRcvSwitchRelayErrors, 16-bit)."},  // PortRcvSwitchRelayErrors
    {"transmit_discards", "Outbound packets discarded because the port was down or congested (PMA PortXmitDiscards, 16-bit)."},  // PortXmitDiscards
    {"transmit_constraint_errors", "Packets not transmitted due to outbound raw filtering or partition enforcement (PMA PortXmitConstraintErrors, 8-bit)."},  // PortXmitConstraintErrors
    {"receive_constraint_errors", "Packets discarded due to inbound raw filtering or partition enforcement (PMA PortRcvConstraintErrors, 8-bit)."},  // PortRcvConstraintErrors
    {"local_link_integrity_errors", "Times the local physical errors exceeded the threshold (PMA LocalLinkIntegrityErrors, 4-bit)."},  // LocalLinkIntegrityErrors
    {"excessive_buffer_overrun_errors", "Consecutive flow-control update periods with buffer overrun (PMA ExcessiveBufferOverrunErrors, 4-bit)."},  // ExcessiveBufferOverrunErrors
    {"qp1_dropped", "QP1 MADs dropped (PMA QP1Dropped, 16-bit)."},  // QP1Dropped
    {"vl15_dropped", "Incoming VL15 (subnet management) packets dropped for lack of buffers (PMA VL15Dropped, 16-bit)."},  // VL15Dropped
    {"transmit_wait", "Ticks during which the port had data to send but no flow-control credits (PMA PortXmitWait, 32-bit)."},  // PortXmitWait
    {"transmit_bytes", "Bytes transmitted on all VLs (PMA PortXmitData, 4-octet words x 4; 64-bit PortCountersExtended where the port has it, else 32-bit)."},  // PortXmitData
    {"receive_bytes", "Bytes received on all VLs (PMA PortRcvData, 4-octet words x 4; 64-bit PortCountersExtended where the port has it, else 32-bit)."},  // PortRcvData
    {"transmit_packets", "Packets transmitted on all VLs (PMA PortXmitPkts; 64-bit PortCountersExtended where the port has it, else 32-bit)."},  // PortXmitPkts
    {"receive_packets", "Packets received on all VLs (PMA PortRcvPkts; 64-bit PortCountersExtended where the port has it, else 32-bit)."},  // PortRcvPkts
    {"unicast_transmit_packets", "Unicast packets transmitted (PMA PortUnicastXmitPkts, PortCountersExtended)."},  // PortUnicastXmitPkts
    {"unicast_receive_packets", "Unicast packets received (PMA PortUnicastRcvPkts, PortCountersExtended)."},  // PortUnicastRcvPkts
    {"multicast_transmit_packets", "Multicast packets transmitted (PMA PortMulticastXmitPkts, PortCountersExtended)."},  // PortMulticastXmitPkts
    {"multicast_receive_packets", "Multicast packets received (PMA PortMulticastRcvPkts, PortCountersExtended)."},  // PortMulticastRcvPkts
    {"receive_local_physical_errors", "Receive errors: local physical errors (PortRcvErrorDetails, 16-bit)."},  // PortLocalPhysicalErrors
    {"receive_malformed_packet_errors", "Receive errors: malformed packets (PortRcvErrorDetails, 16-bit)."},  // PortMalformedPktErrors
    {"receive_buffer_overrun_errors", "Receive errors: buffer overruns (PortRcvErrorDetails, 16-bit)."},  // PortBufferOverrunErrors
    {"receive_dlid_mapping_errors", "Receive errors: DLID mapping (PortRcvErrorDetails, 16-bit)."},  // PortDLIDMappingErrors
    {"receive_vl_mapping_errors", "Receive errors: VL mapping (PortRcvErrorDetails, 16-bit)."},  // PortVLMappingErrors
    {"receive_looping_errors", "Receive errors: looping (PortRcvErrorDetails, 16-bit)."},  // PortLoopingErrors
    {"transmit_inactive_discards", "Transmit discards: port inactive (PortXmitDiscardDetails, 16-bit)."},  // PortInactiveDiscards
    {"transmit_neighbor_mtu_discards", "Transmit discards: neighbor MTU exceeded (PortXmitDiscardDetails, 16-bit)."},  // PortNeighborMTUDiscards
    {"transmit_sw_lifetime_limit_discards", "Transmit discards: switch lifetime limit (PortXmitDiscardDetails, 16-bit)."},  // PortSwLifetimeLimitDiscards
    {"transmit_sw_hoq_lifetime_limit_discards", "Transmit discards: switch head-of-queue lifetime limit (PortXmitDiscardDetails, 16-bit)."},  // PortSwHOQLifetimeLimitDiscards
}};

}  // namespace

const PmaCounterName& pma_counter_name(mad::PmaCounterId id) { return kNames[static_cast<std::size_t>(id)]; }

}  // namespace rdma::collectors
