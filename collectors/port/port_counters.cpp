#include "collectors/port/port_counters.h"

#include <array>

namespace rdma::collectors::port {
namespace {

constexpr std::array kCounters{
    CounterDef{"symbol_error", "rdma_port_symbol_errors_total", "Minor link errors detected on physical lanes (PMA SymbolErrorCounter).", 16, 1},
    CounterDef{"link_error_recovery", "rdma_port_link_error_recovery_total", "Successful link error recovery processes (PMA LinkErrorRecoveryCounter).", 8, 1},
    CounterDef{"link_downed", "rdma_port_link_downed_total", "Times the link error recovery failed and the link went down (PMA LinkDownedCounter).", 8, 1},
    CounterDef{"port_rcv_errors", "rdma_port_receive_errors_total", "Packets received with errors (PMA PortRcvErrors).", 16, 1},
    CounterDef{"port_rcv_remote_physical_errors", "rdma_port_receive_remote_physical_errors_total", "Packets received marked with the EBP delimiter (PMA PortRcvRemotePhysicalErrors).", 16, 1},
    CounterDef{"port_rcv_switch_relay_errors", "rdma_port_receive_switch_relay_errors_total", "Packets discarded because they could not be forwarded by the switch relay (PMA PortRcvSwitchRelayErrors).", 16, 1},
    CounterDef{"port_xmit_discards", "rdma_port_transmit_discards_total", "Outbound packets discarded because the port was down or congested (PMA PortXmitDiscards).", 16, 1},
    CounterDef{"port_xmit_constraint_errors", "rdma_port_transmit_constraint_errors_total", "Packets not transmitted due to outbound raw filtering or partition enforcement (PMA).", 8, 1},
    CounterDef{"port_rcv_constraint_errors", "rdma_port_receive_constraint_errors_total", "Packets discarded due to inbound raw filtering or partition enforcement (PMA).", 8, 1},
    CounterDef{"local_link_integrity_errors", "rdma_port_local_link_integrity_errors_total", "Times the local physical errors exceeded the threshold (PMA LocalLinkIntegrityErrors).", 4, 1},
    CounterDef{"excessive_buffer_overrun_errors", "rdma_port_excessive_buffer_overrun_errors_total", "Consecutive flow-control update periods with buffer overrun (PMA ExcessiveBufferOverrunErrors).", 4, 1},
    CounterDef{"VL15_dropped", "rdma_port_vl15_dropped_total", "Incoming VL15 (subnet management) packets dropped for lack of buffers (PMA VL15Dropped).", 16, 1},
    CounterDef{"port_xmit_wait", "rdma_port_transmit_wait_total", "Ticks during which the port had data to send but no flow-control credits (PMA PortXmitWait).", 32, 1},
    CounterDef{"port_rcv_discards", "rdma_port_receive_discards_total", "Inbound packets discarded (mlx4 extension).", 16, 1},
    CounterDef{"port_xmit_data", "rdma_port_transmit_bytes_total", "Bytes transmitted on all VLs (PMA PortXmitData, 4-octet words converted to bytes).", 0, 4},
    CounterDef{"port_rcv_data", "rdma_port_receive_bytes_total", "Bytes received on all VLs (PMA PortRcvData, 4-octet words converted to bytes).", 0, 4},
    CounterDef{"port_xmit_packets", "rdma_port_transmit_packets_total", "Packets transmitted on all VLs (PMA PortXmitPkts).", 0, 1},
    CounterDef{"port_rcv_packets", "rdma_port_receive_packets_total", "Packets received on all VLs (PMA PortRcvPkts).", 0, 1},
    CounterDef{"unicast_xmit_packets", "rdma_port_unicast_transmit_packets_total", "Unicast packets transmitted (PMA PortUnicastXmitPkts).", 64, 1},
    CounterDef{"unicast_rcv_packets", "rdma_port_unicast_receive_packets_total", "Unicast packets received (PMA PortUnicastRcvPkts).", 64, 1},
    CounterDef{"multicast_xmit_packets", "rdma_port_multicast_transmit_packets_total", "Multicast packets transmitted (PMA PortMulticastXmitPkts).", 64, 1},
    CounterDef{"multicast_rcv_packets", "rdma_port_multicast_receive_packets_total", "Multicast packets received (PMA PortMulticastRcvPkts).", 64, 1},
};

constexpr std::array kLegacyCounters{
    CounterDef{"port_xmit_data_64", "rdma_port_legacy_transmit_bytes_total", "Bytes transmitted (legacy counters_ext, 4-octet words converted to bytes).", 64, 4},
    CounterDef{"port_rcv_data_64", "rdma_port_legacy_receive_bytes_total", "Bytes received (legacy counters_ext, 4-octet words converted to bytes).", 64, 4},
    CounterDef{"port_xmit_packets_64", "rdma_port_legacy_transmit_packets_total", "Packets transmitted (legacy counters_ext).", 64, 1},
    CounterDef{"port_rcv_packets_64", "rdma_port_legacy_receive_packets_total", "Packets received (legacy counters_ext).", 64, 1},
    CounterDef{"port_unicast_xmit_packets", "rdma_port_legacy_unicast_transmit_packets_total", "Unicast packets transmitted (legacy counters_ext).", 64, 1},
    CounterDef{"port_unicast_rcv_packets", "rdma_port_legacy_unicast_receive_packets_total", "Unicast packets received (legacy counters_ext).", 64, 1},
    CounterDef{"port_multicast_xmit_packets", "rdma_port_legacy_multicast_transmit_packets_total", "Multicast packets transmitted (legacy counters_ext).", 64, 1},
    CounterDef{"port_multicast_rcv_packets", "rdma_port_legacy_multicast_receive_packets_total", "Multicast packets received (legacy counters_ext).", 64, 1},
};

template <class Table>
const CounterDef* find_in(const Table& t, std::string_view file) {
  for (const auto& d : t)
    if (d.file == file) return &d;
  return nullptr;
}

}  // namespace

const CounterDef* find_counter(std::string_view file) { return find_in(kCounters, file); }
const CounterDef* find_legacy_counter(std::string_view file) { return find_in(kLegacyCounters, file); }

std::uint8_t data_counter_width(bool has_unicast_counters, std::string_view driver) {
  if (has_unicast_counters || driver == "hfi1") return 64;
  if (driver == "mlx4") return 0;  // table depends on firmware; no saturation claim
  return 32;
}

}  // namespace rdma::collectors::port
