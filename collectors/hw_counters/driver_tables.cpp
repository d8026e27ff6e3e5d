#include "collectors/hw_counters/driver_tables.h"

#include <algorithm>

namespace rdma::collectors::hw_counters {
namespace {

using K = Kind;

// One help text for the family both retries-exceeded kinds share.
constexpr std::string_view kRetriesHelp =
    "Requests that ended a queue pair in error because the retry limit was exceeded: kind=\"transport\" (ACK "
    "timeouts or NAKs; IBV_WC_RETRY_EXC_ERR, NCCL's \"transport retry counter exceeded\"), kind=\"rnr\" (receiver "
    "not ready; IBV_WC_RNR_RETRY_EXC_ERR) (vendor-normalised).";

constexpr std::array<KindDef, static_cast<std::size_t>(Kind::kCount)> kKinds{{
    {K::kCnpSent, "rdma_roce_cnp_sent_total", "RoCE congestion notification packets (CNPs) sent by this port as notification point (vendor-normalised)."},
    {K::kCnpHandled, "rdma_roce_cnp_handled_total", "CNPs received and handled by this port as reaction point: it lowered its rate (vendor-normalised)."},
    {K::kCnpIgnored, "rdma_roce_cnp_ignored_total", "CNPs received and ignored by the reaction point (vendor-normalised)."},
    {K::kEcnMarkedPackets, "rdma_roce_ecn_marked_packets_total", "RoCE packets received with the ECN congestion-experienced mark (vendor-normalised)."},
    {K::kOutOfSequence, "rdma_out_of_sequence_packets_total", "Packets received out of sequence by the responder (vendor-normalised)."},
    {K::kPacketSeqErrNaks, "rdma_packet_sequence_error_naks_total", "NAK-sequence-error packets received by the requester, each starting a retransmission (vendor-normalised)."},
    {K::kLocalAckTimeouts, "rdma_local_ack_timeouts_total", "Requester ACK timeouts (transport retry timer expired) (vendor-normalised)."},
    {K::kRetransmissions, "rdma_retransmissions_total", "Requester retransmissions: retry events or retransmitted packets, per the driver (see docs) (vendor-normalised)."},
    {K::kRnrNakRetries, "rdma_rnr_nak_retries_total", "Receiver-not-ready NAKs received by the requester, each causing a retry (vendor-normalised)."},
    {K::kDuplicateRequests, "rdma_duplicate_requests_total", "Duplicate requests received by the responder (vendor-normalised)."},
    {K::kIcrcErrors, "rdma_icrc_errors_total", "Packets received with a bad invariant CRC (vendor-normalised)."},
    {K::kReceiveDiscards, "rdma_receive_discards_total", "RDMA packets received and discarded by the adapter (vendor-normalised)."},
    {K::kTransmitDiscards, "rdma_transmit_discards_total", "RDMA packets discarded on transmit (vendor-normalised)."},
    {K::kOutOfBuffer, "rdma_out_of_buffer_drops_total", "Packets dropped because no receive WQE was posted (out of buffer) (vendor-normalised)."},
    {K::kTransmitPackets, "rdma_transport_transmit_packets_total", "RDMA transport packets sent, from the driver's hw_counters (vendor-normalised)."},
    {K::kReceivePackets, "rdma_transport_receive_packets_total", "RDMA transport packets received, from the driver's hw_counters (vendor-normalised)."},
    {K::kTransmitBytes, "rdma_transport_transmit_bytes_total", "RDMA transport bytes sent, from the driver's hw_counters (vendor-normalised)."},
    {K::kReceiveBytes, "rdma_transport_receive_bytes_total", "RDMA transport bytes received, from the driver's hw_counters (vendor-normalised)."},
    {K::kQpRetriesExceededTransport, "rdma_qp_retries_exceeded_total", kRetriesHelp, "transport"},
    {K::kQpRetriesExceededRnr, "rdma_qp_retries_exceeded_total", kRetriesHelp, "rnr"},
}};

constexpr MappingRow P(Kind k, std::string_view a, std::string_view note = {}) {
  return {k, Scope::kPort, {a, {}, {}}, note};
}
constexpr MappingRow P2(Kind k, std::string_view a, std::string_view b, std::string_view note = {}) {
  return {k, Scope::kPort, {a, b, {}}, note};
}
constexpr MappingRow P3(Kind k, std::string_view a, std::string_view b, std::string_view c, std::string_view note = {}) {
  return {k, Scope::kPort, {a, b, c}, note};
}
constexpr MappingRow D(Kind k, std::string_view a, std::string_view note = {}) {
  return {k, Scope::kDevice, {a, {}, {}}, note};
}

constexpr std::string_view kNetlinkOnly = "optional counter: netlink only, when enabled with `rdma statistic set ... optional-counters`";

// mlx5 (drivers/infiniband/hw/mlx5/counters.c).
constexpr MappingRow kMlx5[] = {
    P(K::kCnpSent, "np_cnp_sent"),
    P(K::kCnpSent, "cc_tx_cnp_pkts", kNetlinkOnly),
    P(K::kCnpHandled, "rp_cnp_handled"),
    P(K::kCnpHandled, "cc_rx_cnp_pkts", kNetlinkOnly),
    P(K::kCnpIgnored, "rp_cnp_ignored"),
    P(K::kEcnMarkedPackets, "np_ecn_marked_roce_packets"),
    P(K::kEcnMarkedPackets, "cc_rx_ce_pkts", kNetlinkOnly),
    P(K::kOutOfSequence, "out_of_sequence", "32-bit Q counter (wrap-extended)"),
    P(K::kPacketSeqErrNaks, "packet_seq_err", "32-bit Q counter (wrap-extended)"),
    P(K::kLocalAckTimeouts, "local_ack_timeout_err", "32-bit Q counter (wrap-extended)"),
    P(K::kRnrNakRetries, "rnr_nak_retry_err", "32-bit Q counter (wrap-extended)"),
    P(K::kDuplicateRequests, "duplicate_request", "32-bit Q counter (wrap-extended)"),
    P(K::kIcrcErrors, "rx_icrc_encapsulated"),
    P(K::kOutOfBuffer, "out_of_buffer", "32-bit Q counter (wrap-extended)"),
    P(K::kQpRetriesExceededTransport, "req_transport_retries_exceeded",
      "32-bit Q counter (wrap-extended); firmware with enhanced_error_q_counters"),
    P(K::kQpRetriesExceededRnr, "req_rnr_retries_exceeded",
      "32-bit Q counter (wrap-extended); firmware with enhanced_error_q_counters"),
    P(K::kTransmitPackets, "rdma_tx_packets", kNetlinkOnly),
    P(K::kReceivePackets, "rdma_rx_packets", kNetlinkOnly),
    P(K::kTransmitBytes, "rdma_tx_bytes", kNetlinkOnly),
    P(K::kReceiveBytes, "rdma_rx_bytes", kNetlinkOnly),
};

// bnxt_re (hw/bnxt_re/hw_counters.c): kernel names before 2025, then the mlx5-compatible
// names of the 2025 rename, then Broadcom's out-of-tree driver.
constexpr MappingRow kBnxtRe[] = {
    P(K::kCnpSent, "tx_cnp_pkts", "before the 2025 rename"),
    P(K::kCnpSent, "np_cnp_pkts", "2025 rename"),
    P(K::kCnpSent, "np_cnp_sent", "out-of-tree driver"),
    P(K::kCnpHandled, "rx_cnp_pkts", "before the 2025 rename"),
    P(K::kCnpHandled, "rp_cnp_handled", "2025 rename"),
    P(K::kCnpIgnored, "rp_cnp_ignored", "out-of-tree driver"),
    P(K::kEcnMarkedPackets, "rx_ecn_marked_pkts", "before the 2025 rename"),
    P(K::kEcnMarkedPackets, "np_ecn_marked_roce_packets", "2025 rename"),
    P(K::kOutOfSequence, "oos_drop_count", "before the 2025 rename"),
    P(K::kOutOfSequence, "out_of_sequence", "2025 rename"),
    P(K::kPacketSeqErrNaks, "seq_err_naks_rcvd", "before the 2025 rename"),
    P(K::kPacketSeqErrNaks, "packet_seq_err", "2025 rename"),
    P(K::kLocalAckTimeouts, "to_retransmits", "before the 2025 rename"),
    P(K::kLocalAckTimeouts, "local_ack_timeout_err", "2025 rename"),
    P(K::kRnrNakRetries, "rnr_naks_rcvd", "before the 2025 rename"),
    P(K::kRnrNakRetries, "rnr_nak_retry_err", "2025 rename"),
    P(K::kDuplicateRequests, "dup_req", "before the 2025 rename"),
    P(K::kDuplicateRequests, "duplicate_request", "2025 rename"),
    P(K::kIcrcErrors, "rx_icrc_encapsulated", "out-of-tree driver"),
    P(K::kReceiveDiscards, "rx_roce_discards"),
    P(K::kTransmitDiscards, "tx_roce_discards"),
    P(K::kOutOfBuffer, "rx_out_of_buffer", "before the 2025 rename"),
    P(K::kOutOfBuffer, "out_of_buffer", "2025 rename"),
    P(K::kTransmitPackets, "tx_pkts"),
    P(K::kReceivePackets, "rx_pkts"),
    P(K::kTransmitBytes, "tx_bytes"),
    P(K::kReceiveBytes, "rx_bytes"),
    P(K::kQpRetriesExceededTransport, "max_retry_exceeded", "same name before and after the 2025 rename; no RNR counterpart"),
};

// irdma (hw/irdma/verbs.c): gen1/gen2 names, then the GEN3 names (with spaces).
constexpr MappingRow kIrdma[] = {
    P(K::kCnpSent, "cnpSent"),
    P(K::kCnpHandled, "cnpHandled"),
    P(K::kCnpIgnored, "cnpIgnored"),
    P(K::kEcnMarkedPackets, "RxECNMrkd"),
    P(K::kOutOfSequence, "Rcvd Out of order packets", "GEN3"),
    P(K::kPacketSeqErrNaks, "Nak Sequence Error", "GEN3"),
    P(K::kLocalAckTimeouts, "RTO", "GEN3"),
    P(K::kRetransmissions, "tcpRetransSegs", "iWARP: TCP segments retransmitted"),
    P(K::kRetransmissions, "RetransSegs", "GEN3 name of tcpRetransSegs"),
    P(K::kRnrNakRetries, "RNR received", "GEN3"),
    P(K::kIcrcErrors, "CRC errors", "GEN3"),
    P2(K::kReceiveDiscards, "ip4InDiscards", "ip6InDiscards", "sum"),
    P(K::kReceiveDiscards, "ip4InDiscards", "IPv4 only"),
    P2(K::kTransmitPackets, "ip4OutPkts", "ip6OutPkts", "sum"),
    P(K::kTransmitPackets, "ip4OutPkts", "IPv4 only"),
    P2(K::kReceivePackets, "ip4InPkts", "ip6InPkts", "sum"),
    P(K::kReceivePackets, "ip4InPkts", "IPv4 only"),
    P2(K::kTransmitBytes, "ip4OutOctets", "ip6OutOctets", "sum"),
    P(K::kTransmitBytes, "ip4OutOctets", "IPv4 only"),
    P2(K::kReceiveBytes, "ip4InOctets", "ip6InOctets", "sum"),
    P(K::kReceiveBytes, "ip4InOctets", "IPv4 only"),
};

// rxe (sw/rxe/rxe_hw_counters.c).
constexpr MappingRow kRxe[] = {
    P(K::kOutOfSequence, "out_of_seq_request"),
    P(K::kPacketSeqErrNaks, "rcvd_seq_err"),
    P(K::kRetransmissions, "completer_retry_err", "retry events of the completer (timeout or NAK)"),
    P(K::kRnrNakRetries, "rcvd_rnr_err"),
    P(K::kDuplicateRequests, "duplicate_request"),
    P(K::kTransmitPackets, "sent_pkts"),
    P(K::kReceivePackets, "rcvd_pkts"),
    P(K::kTransmitBytes, "sent_bytes", "newer kernels"),
    P(K::kReceiveBytes, "rcvd_bytes", "newer kernels"),
    P(K::kQpRetriesExceededTransport, "retry_exceeded_err"),
    P(K::kQpRetriesExceededRnr, "retry_rnr_exceeded_err"),
};

// efa (hw/efa/efa_verbs.c): SRD, no CNP/ECN counters.
constexpr MappingRow kEfa[] = {
    P(K::kLocalAckTimeouts, "retrans_timeout_events"),
    P(K::kRetransmissions, "retrans_pkts", "retransmitted packets"),
    P(K::kReceiveDiscards, "rx_drops"),
    P(K::kTransmitPackets, "tx_pkts"),
    P(K::kReceivePackets, "rx_pkts"),
    P(K::kTransmitBytes, "tx_bytes"),
    P(K::kReceiveBytes, "rx_bytes"),
};

// mana (hw/mana/counters.c): some congestion counters only at device level (single port).
constexpr MappingRow kMana[] = {
    D(K::kCnpSent, "sent_cnps"),
    P(K::kCnpHandled, "received_cnps"),
    D(K::kCnpHandled, "received_cnp_count"),
    D(K::kEcnMarkedPackets, "received_ecns"),
    P(K::kOutOfSequence, "responder_oos"),
    P(K::kPacketSeqErrNaks, "requester_oos_nak"),
    P(K::kLocalAckTimeouts, "requester_timeout"),
    P(K::kRnrNakRetries, "requester_rnr_nak"),
    P(K::kDuplicateRequests, "responder_dup_request"),
    P(K::kDuplicateRequests, "dup_rx_requests"),
    P(K::kTransmitPackets, "tx_packets"),
    P(K::kReceivePackets, "rx_packets"),
    P(K::kTransmitBytes, "tx_bytes"),
    P(K::kReceiveBytes, "rx_bytes"),
    P(K::kQpRetriesExceededTransport, "requester_retries_exceeded"),
    P(K::kQpRetriesExceededRnr, "requester_rnr_nak_retries_exceeded"),
};

// erdma (hw/erdma/erdma_verbs.c, erdma_descs[]): drops by cause, summed. Alibaba's out-of-tree
// driver (erdma_stats.c, erdma_stats_names[]) names the same hardware counters with a "hw_"
// prefix and its transmit drops without "tx_" (the names of the v1 upstream patch).
constexpr MappingRow kErdma[] = {
    P3(K::kReceiveDiscards, "rx_disable_drop_cnt", "rx_bps_limit_drop_cnt", "rx_pps_limit_drop_cnt", "sum"),
    P(K::kReceiveDiscards, "rx_disable_drop_cnt", "older kernels"),
    P3(K::kTransmitDiscards, "tx_disable_drop_cnt", "tx_bps_limit_drop_cnt", "tx_pps_limit_drop_cnt", "sum"),
    P(K::kTransmitDiscards, "tx_disable_drop_cnt", "older kernels"),
    P(K::kTransmitPackets, "tx_packets_cnt"),
    P(K::kReceivePackets, "rx_packets_cnt"),
    P(K::kTransmitBytes, "tx_bytes_cnt"),
    P(K::kReceiveBytes, "rx_bytes_cnt"),
    P3(K::kReceiveDiscards, "hw_rx_disable_drop_cnt", "hw_rx_bps_limit_drop_cnt", "hw_rx_pps_limit_drop_cnt",
       "out-of-tree driver, sum"),
    P3(K::kTransmitDiscards, "hw_disable_drop_cnt", "hw_bps_limit_drop_cnt", "hw_pps_limit_drop_cnt",
       "out-of-tree driver, sum"),
    P(K::kTransmitPackets, "hw_tx_packets_cnt", "out-of-tree driver"),
    P(K::kReceivePackets, "hw_rx_packets_cnt", "out-of-tree driver"),
    P(K::kTransmitBytes, "hw_tx_bytes_cnt", "out-of-tree driver"),
    P(K::kReceiveBytes, "hw_rx_bytes_cnt", "out-of-tree driver"),
};

// hns (hw/hns/hns_roce_main.c, hns_roce_port_stats_descs[]; enum hns_roce_hw_pkt_stat_index in
// hns_roce_device.h): HW counters on HIP09+ PFs only (HIP08 and VFs show the software "dfx"
// counters). rx_err_pkt/tx_err_pkt (packets with errors) and trp_*_err_pkt fit no normalised
// family and stay raw series.
constexpr MappingRow kHns[] = {
    P(K::kCnpSent, "tx_cnp_pkt"),
    P(K::kCnpHandled, "rx_cnp_pkt"),
    P(K::kTransmitPackets, "tx_pkt"),
    P(K::kReceivePackets, "rx_pkt"),
};

// ionic (AMD Pensando, hw/ionic/ionic_hw_stats.c): the kernel has no names; the firmware sends
// them (IONIC_V1_ADMIN_STATS_HDRS) with a type per counter (8/16/32/64-bit, LE or BE). Names as
// the firmware defines them (Pensando's rdma_stats_hdrs[] in nic/hal/plugins/cfg/rdma/init.cc),
// misspelling included. Every Pollara counter without a row here is still exported raw.
constexpr MappingRow kIonic[] = {
    P(K::kCnpSent, "tx_rdma_cnp_pkts"),
    P(K::kCnpHandled, "rx_rdma_cnp_pkts", "CNPs received"),
    P(K::kEcnMarkedPackets, "rx_rdma_ecn_pkts"),
    P(K::kOutOfSequence, "resp_rx_outouf_seq", "the firmware's spelling"),
    P(K::kPacketSeqErrNaks, "req_rx_pkt_seq_err"),
    P(K::kDuplicateRequests, "resp_rx_dup_request"),
    P(K::kOutOfBuffer, "resp_rx_outof_buf"),
    P2(K::kTransmitPackets, "tx_rdma_ucast_pkts", "tx_rdma_mcast_pkts", "sum"),
    P2(K::kReceivePackets, "rx_rdma_ucast_pkts", "rx_rdma_mcast_pkts", "sum"),
    P2(K::kTransmitBytes, "tx_rdma_ucast_bytes", "tx_rdma_mcast_bytes", "sum"),
    P2(K::kReceiveBytes, "rx_rdma_ucast_bytes", "rx_rdma_mcast_bytes", "sum"),
    P(K::kQpRetriesExceededTransport, "req_tx_retry_excd_err", "no RNR counterpart among the firmware's names"),
};

constexpr DriverTable kTables[] = {
    {"mlx5", kMlx5},   {"bnxt_re", kBnxtRe}, {"irdma", kIrdma},
    {"rxe", kRxe},     {"efa", kEfa},        {"mana", kMana},
    {"erdma", kErdma}, {"hns", kHns},        {"ionic", kIonic, /*all_ones_invalid=*/true, /*runtime_widths=*/true},
};

// Gauges among the hw_counters: exact names, or prefixes ending in '_'.
struct GaugeRule {
  std::string_view driver;
  std::string_view name;
  bool prefix;
};
constexpr GaugeRule kGauges[] = {
    {"bnxt_re", "active_", true},      {"bnxt_re", "watermark_", true}, {"bnxt_re", "db_fifo_register", false},
    {"mana", "current_rate", false},   {"mana", "num_qps_congested", false},
    {"hfi1", "DRIVER_CtxtsOpen", false},
};

// mlx5 Q counters are 32-bit hardware fields (also as vport_* on switchdev representors);
// the congestion (rp_*, np_*), ext_ppcnt and optional counters are 64-bit.
constexpr std::string_view kMlx5QCounters[] = {
    "rx_write_requests", "rx_read_requests", "rx_atomic_requests", "rx_dct_connect", "out_of_buffer",
    "out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "packet_seq_err", "implied_nak_seq_err",
    "local_ack_timeout_err", "resp_local_length_error", "resp_cqe_error", "req_cqe_error",
    "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors", "resp_cqe_flush_error",
    "req_cqe_flush_error", "req_transport_retries_exceeded", "req_rnr_retries_exceeded", "roce_adp_retrans",
    "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans",
};

}  // namespace

const std::array<KindDef, static_cast<std::size_t>(Kind::kCount)>& kinds() { return kKinds; }
const KindDef& kind_def(Kind k) { return kKinds[static_cast<std::size_t>(k)]; }

std::span<const DriverTable> driver_tables() { return kTables; }

const DriverTable* table_for(std::string_view driver) {
  for (const auto& t : kTables)
    if (t.driver == driver) return &t;
  return nullptr;
}

std::span<const MappingRow> mapping_for(std::string_view driver) {
  const DriverTable* t = table_for(driver);
  return t ? t->rows : std::span<const MappingRow>{};
}

bool is_gauge(std::string_view driver, std::string_view counter) {
  return std::any_of(std::begin(kGauges), std::end(kGauges), [&](const GaugeRule& g) {
    return g.driver == driver && (g.prefix ? counter.starts_with(g.name) : counter == g.name);
  });
}

std::uint8_t counter_width(std::string_view driver, std::string_view counter) {
  if (driver != "mlx5") return 64;
  if (counter.starts_with("vport_")) counter.remove_prefix(6);
  for (auto q : kMlx5QCounters)
    if (q == counter) return 32;
  return 64;
}

}  // namespace rdma::collectors::hw_counters
