// Every row of every driver's mapping table, through the real collector on a fake sysfs tree,
// plus an independent list of the vendor names each normalised metric must come from.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <span>

#include "collectors/hw_counters/driver_tables.h"
#include "tests/hw_counters/helpers.h"

using namespace rdma::collectors::hw_counters;
using namespace hwtest;

// The labels of a kind's series on port 1 of `dev`.
static Labels kind_labels(const KindDef& k, const std::string& dev) {
  const Labels l{{"device", dev}, {"port", "1"}};
  return k.kind_label.empty() ? l : with(l, "kind", std::string(k.kind_label));
}

TEST_CASE("the normalised metrics are in enum order, unique, rdma_ counters") {
  std::set<std::pair<std::string_view, std::string_view>> names;
  for (std::size_t i = 0; i < kinds().size(); ++i) {
    const auto& k = kinds()[i];
    CHECK(static_cast<std::size_t>(k.kind) == i);
    CHECK(k.metric.starts_with("rdma_"));
    CHECK(k.metric.ends_with("_total"));
    CHECK_FALSE(k.help.empty());
    CHECK(names.insert({k.metric, k.kind_label}).second);
  }
}

TEST_CASE("the nine mapped drivers have tables, siw has none") {
  std::set<std::string_view> drivers;
  for (const auto& t : driver_tables()) {
    CHECK_FALSE(t.rows.empty());
    drivers.insert(t.driver);
  }
  CHECK(drivers == std::set<std::string_view>{"mlx5", "bnxt_re", "irdma", "rxe", "efa", "mana", "erdma", "hns", "ionic"});
  CHECK(mapping_for("siw").empty());
}

TEST_CASE("every mapping row yields its normalised metric, alone, with the exact (summed) value") {
  int rows = 0;
  for (const auto& t : driver_tables()) {
    for (const auto& row : t.rows) {
      INFO(t.driver << " " << kind_def(row.kind).metric << " <- " << row.counters[0] << " " << row.counters[1] << " "
                    << row.counters[2]);
      TempTree tree;
      const std::string dev = std::string(t.driver) + "_t";
      tree.port_dir(dev, 1);
      std::uint64_t sum = 0, v = 9223372036854775000ull;  // near 2^63: u64 end to end
      for (auto c : row.counters) {
        if (c.empty()) continue;
        if (row.scope == Scope::kPort) tree.port_counter(dev, 1, std::string(c), v);
        else tree.device_counter(dev, std::string(c), v);
        sum += v;
        v = 1000 + sum % 1000;
      }
      HwCountersCollector col(sysfs_only());
      auto s = collect(col, model_of(tree, {{dev, std::string(t.driver), 1}}));
      CHECK(s.errors.empty());
      CHECK(u64(s.sink, std::string(kind_def(row.kind).metric), kind_labels(kind_def(row.kind), dev)) == sum);
      CHECK(count(s.sink, std::string(kind_def(row.kind).metric)) == 1);
      ++rows;
    }
  }
  CHECK(rows > 100);
}

TEST_CASE("device-level rows stand for the port only on single-port devices") {
  TempTree tree;
  tree.device_counter("mana_0", "sent_cnps", 5);
  tree.port_dir("mana_0", 1);
  tree.port_dir("mana_0", 2);
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(tree, {{"mana_0", "mana", 2}}));
  CHECK(count(s.sink, "rdma_roce_cnp_sent_total") == 0);
  CHECK(u64(s.sink, "rdma_hw_device_counters_total", {{"device", "mana_0"}, {"counter", "sent_cnps"}}) == 5);
}

TEST_CASE("the first present alternative wins: current kernel name over rename, sysfs over optional") {
  TempTree tree;
  tree.port_counter("bnxt_re0", 1, "tx_cnp_pkts", 11);
  tree.port_counter("bnxt_re0", 1, "np_cnp_pkts", 22);
  tree.port_counter("mlx5_0", 1, "np_ecn_marked_roce_packets", 33);
  tree.port_counter("mlx5_0", 1, "cc_rx_ce_pkts", 44);
  tree.port_counter("irdma0", 1, "ip4OutPkts", 5);  // IPv4-only fallback of the ip4+ip6 sum
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(tree, {{"bnxt_re0", "bnxt_re"}, {"mlx5_0", "mlx5"}, {"irdma0", "irdma"}}));
  CHECK(u64(s.sink, "rdma_roce_cnp_sent_total", {{"device", "bnxt_re0"}, {"port", "1"}}) == 11);
  CHECK(u64(s.sink, "rdma_roce_ecn_marked_packets_total", {{"device", "mlx5_0"}, {"port", "1"}}) == 33);
  CHECK(u64(s.sink, "rdma_transport_transmit_packets_total", {{"device", "irdma0"}, {"port", "1"}}) == 5);
}

// Written from the kernel drivers (and the sysfs catalog), independently of driver_tables.cpp:
// (driver, vendor counter) -> normalised metric.
struct Expect {
  const char* driver;
  const char* counter;
  const char* metric;
  const char* kind = nullptr;  // the kind label of rdma_qp_retries_exceeded_total
};
constexpr Expect kExpected[] = {
    {"mlx5", "np_cnp_sent", "rdma_roce_cnp_sent_total"},
    {"mlx5", "rp_cnp_handled", "rdma_roce_cnp_handled_total"},
    {"mlx5", "rp_cnp_ignored", "rdma_roce_cnp_ignored_total"},
    {"mlx5", "np_ecn_marked_roce_packets", "rdma_roce_ecn_marked_packets_total"},
    {"mlx5", "cc_rx_ce_pkts", "rdma_roce_ecn_marked_packets_total"},
    {"mlx5", "cc_rx_cnp_pkts", "rdma_roce_cnp_handled_total"},
    {"mlx5", "cc_tx_cnp_pkts", "rdma_roce_cnp_sent_total"},
    {"mlx5", "out_of_sequence", "rdma_out_of_sequence_packets_total"},
    {"mlx5", "packet_seq_err", "rdma_packet_sequence_error_naks_total"},
    {"mlx5", "local_ack_timeout_err", "rdma_local_ack_timeouts_total"},
    {"mlx5", "rnr_nak_retry_err", "rdma_rnr_nak_retries_total"},
    {"mlx5", "duplicate_request", "rdma_duplicate_requests_total"},
    {"mlx5", "rx_icrc_encapsulated", "rdma_icrc_errors_total"},
    {"mlx5", "out_of_buffer", "rdma_out_of_buffer_drops_total"},
    {"bnxt_re", "tx_cnp_pkts", "rdma_roce_cnp_sent_total"},
    {"bnxt_re", "np_cnp_pkts", "rdma_roce_cnp_sent_total"},
    {"bnxt_re", "rx_cnp_pkts", "rdma_roce_cnp_handled_total"},
    {"bnxt_re", "rp_cnp_handled", "rdma_roce_cnp_handled_total"},
    {"bnxt_re", "rx_ecn_marked_pkts", "rdma_roce_ecn_marked_packets_total"},
    {"bnxt_re", "np_ecn_marked_roce_packets", "rdma_roce_ecn_marked_packets_total"},
    {"bnxt_re", "oos_drop_count", "rdma_out_of_sequence_packets_total"},
    {"bnxt_re", "out_of_sequence", "rdma_out_of_sequence_packets_total"},
    {"bnxt_re", "seq_err_naks_rcvd", "rdma_packet_sequence_error_naks_total"},
    {"bnxt_re", "packet_seq_err", "rdma_packet_sequence_error_naks_total"},
    {"bnxt_re", "to_retransmits", "rdma_local_ack_timeouts_total"},
    {"bnxt_re", "local_ack_timeout_err", "rdma_local_ack_timeouts_total"},
    {"bnxt_re", "rnr_naks_rcvd", "rdma_rnr_nak_retries_total"},
    {"bnxt_re", "rnr_nak_retry_err", "rdma_rnr_nak_retries_total"},
    {"bnxt_re", "dup_req", "rdma_duplicate_requests_total"},
    {"bnxt_re", "duplicate_request", "rdma_duplicate_requests_total"},
    {"bnxt_re", "rx_roce_discards", "rdma_receive_discards_total"},
    {"bnxt_re", "rx_out_of_buffer", "rdma_out_of_buffer_drops_total"},
    {"bnxt_re", "out_of_buffer", "rdma_out_of_buffer_drops_total"},
    {"irdma", "cnpSent", "rdma_roce_cnp_sent_total"},
    {"irdma", "cnpHandled", "rdma_roce_cnp_handled_total"},
    {"irdma", "cnpIgnored", "rdma_roce_cnp_ignored_total"},
    {"irdma", "RxECNMrkd", "rdma_roce_ecn_marked_packets_total"},
    {"irdma", "Rcvd Out of order packets", "rdma_out_of_sequence_packets_total"},
    {"irdma", "Nak Sequence Error", "rdma_packet_sequence_error_naks_total"},
    {"irdma", "RTO", "rdma_local_ack_timeouts_total"},
    {"irdma", "RNR received", "rdma_rnr_nak_retries_total"},
    {"irdma", "CRC errors", "rdma_icrc_errors_total"},
    {"rxe", "out_of_seq_request", "rdma_out_of_sequence_packets_total"},
    {"rxe", "rcvd_seq_err", "rdma_packet_sequence_error_naks_total"},
    {"rxe", "completer_retry_err", "rdma_retransmissions_total"},
    {"rxe", "rcvd_rnr_err", "rdma_rnr_nak_retries_total"},
    {"rxe", "duplicate_request", "rdma_duplicate_requests_total"},
    {"rxe", "sent_pkts", "rdma_transport_transmit_packets_total"},
    {"rxe", "rcvd_pkts", "rdma_transport_receive_packets_total"},
    {"efa", "retrans_timeout_events", "rdma_local_ack_timeouts_total"},
    {"efa", "retrans_pkts", "rdma_retransmissions_total"},
    {"efa", "rx_drops", "rdma_receive_discards_total"},
    {"mana", "received_cnps", "rdma_roce_cnp_handled_total"},
    {"mana", "responder_oos", "rdma_out_of_sequence_packets_total"},
    {"mana", "requester_oos_nak", "rdma_packet_sequence_error_naks_total"},
    {"mana", "requester_timeout", "rdma_local_ack_timeouts_total"},
    {"mana", "requester_rnr_nak", "rdma_rnr_nak_retries_total"},
    {"mana", "responder_dup_request", "rdma_duplicate_requests_total"},
    {"erdma", "rx_disable_drop_cnt", "rdma_receive_discards_total"},
    {"erdma", "tx_disable_drop_cnt", "rdma_transmit_discards_total"},
    {"hns", "tx_cnp_pkt", "rdma_roce_cnp_sent_total"},
    {"hns", "rx_cnp_pkt", "rdma_roce_cnp_handled_total"},
    // Retries exceeded: the counter that counts QPs moved to error by an exhausted retry count,
    // not the retries themselves (mlx5 local_ack_timeout_err / rnr_nak_retry_err count those).
    {"mlx5", "req_transport_retries_exceeded", "rdma_qp_retries_exceeded_total", "transport"},
    {"mlx5", "req_rnr_retries_exceeded", "rdma_qp_retries_exceeded_total", "rnr"},
    {"bnxt_re", "max_retry_exceeded", "rdma_qp_retries_exceeded_total", "transport"},
    {"rxe", "retry_exceeded_err", "rdma_qp_retries_exceeded_total", "transport"},
    {"rxe", "retry_rnr_exceeded_err", "rdma_qp_retries_exceeded_total", "rnr"},
    {"mana", "requester_retries_exceeded", "rdma_qp_retries_exceeded_total", "transport"},
    {"mana", "requester_rnr_nak_retries_exceeded", "rdma_qp_retries_exceeded_total", "rnr"},
    {"erdma", "hw_tx_packets_cnt", "rdma_transport_transmit_packets_total"},
    {"erdma", "hw_rx_bytes_cnt", "rdma_transport_receive_bytes_total"},
};

// ionic (2^64-1 is its "undecodable" value, so these use another one).
constexpr Expect kExpectedIonic[] = {
    {"ionic", "tx_rdma_cnp_pkts", "rdma_roce_cnp_sent_total"},
    {"ionic", "rx_rdma_cnp_pkts", "rdma_roce_cnp_handled_total"},
    {"ionic", "rx_rdma_ecn_pkts", "rdma_roce_ecn_marked_packets_total"},
    {"ionic", "resp_rx_outouf_seq", "rdma_out_of_sequence_packets_total"},
    {"ionic", "req_rx_pkt_seq_err", "rdma_packet_sequence_error_naks_total"},
    {"ionic", "resp_rx_dup_request", "rdma_duplicate_requests_total"},
    {"ionic", "resp_rx_outof_buf", "rdma_out_of_buffer_drops_total"},
    {"ionic", "req_tx_retry_excd_err", "rdma_qp_retries_exceeded_total", "transport"},
};

static Labels expect_labels(const Expect& e) {
  const Labels l{{"device", "d0"}, {"port", "1"}};
  return e.kind ? with(l, "kind", e.kind) : l;
}

TEST_CASE("independent expectations: vendor counter -> normalised metric") {
  const std::pair<std::span<const Expect>, std::uint64_t> tables[] = {{kExpected, 18446744073709551615ull},
                                                                        {kExpectedIonic, 18446744073709551614ull}};
  for (const auto& [expected, v] : tables) {
    for (const auto& e : expected) {
      INFO(e.driver << " " << e.counter);
      TempTree tree;
      tree.port_counter("d0", 1, e.counter, v);
      HwCountersCollector col(sysfs_only());
      auto s = collect(col, model_of(tree, {{"d0", e.driver}}));
      CHECK(u64(s.sink, e.metric, expect_labels(e)) == v);
    }
  }
  // mana's device-level congestion counters on its single port
  TempTree tree;
  tree.device_counter("mana_0", "sent_cnps", 1);
  tree.device_counter("mana_0", "received_ecns", 2);
  tree.device_counter("mana_0", "received_cnp_count", 3);
  tree.port_dir("mana_0", 1);
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(tree, {{"mana_0", "mana"}}));
  CHECK(u64(s.sink, "rdma_roce_cnp_sent_total", {{"device", "mana_0"}, {"port", "1"}}) == 1);
  CHECK(u64(s.sink, "rdma_roce_ecn_marked_packets_total", {{"device", "mana_0"}, {"port", "1"}}) == 2);
  CHECK(u64(s.sink, "rdma_roce_cnp_handled_total", {{"device", "mana_0"}, {"port", "1"}}) == 3);
}

TEST_CASE("gauges and widths per driver") {
  CHECK(is_gauge("bnxt_re", "active_qps"));
  CHECK(is_gauge("bnxt_re", "watermark_mrs"));
  CHECK(is_gauge("bnxt_re", "db_fifo_register"));
  CHECK_FALSE(is_gauge("bnxt_re", "rx_pkts"));
  CHECK(is_gauge("mana", "current_rate"));
  CHECK(is_gauge("mana", "num_qps_congested"));
  CHECK(is_gauge("hfi1", "DRIVER_CtxtsOpen"));
  CHECK_FALSE(is_gauge("mlx5", "active_qps"));
  CHECK(counter_width("mlx5", "rx_write_requests") == 32);
  CHECK(counter_width("mlx5", "vport_out_of_sequence") == 32);
  CHECK(counter_width("mlx5", "roce_slow_restart_cnps") == 32);
  CHECK(counter_width("mlx5", "np_cnp_sent") == 64);
  CHECK(counter_width("mlx5", "rx_icrc_encapsulated") == 64);
  CHECK(counter_width("mlx5", "cc_rx_ce_pkts") == 64);
  CHECK(counter_width("rxe", "duplicate_request") == 64);
  CHECK(counter_width("bnxt_re", "out_of_buffer") == 64);
}

TEST_CASE("docs/metrics.md lists every mapping row, and only those") {
  std::ifstream f(std::string(RDMA_SOURCE_DIR) + "/docs/metrics.md");
  REQUIRE(f);
  std::set<std::string> doc_rows;
  std::set<std::string_view> drivers;
  for (const auto& t : driver_tables()) drivers.insert(t.driver);
  for (std::string line; std::getline(f, line);) {
    for (auto d : drivers)
      if (line.starts_with("| " + std::string(d) + " | `")) {
        // "| driver | counters | metric | scope |" without the note
        std::size_t bars = 0, at = 0;
        while (bars < 4 && (at = line.find('|', at + 1)) != std::string::npos) ++bars;
        doc_rows.insert(line.substr(0, at + 1));
      }
  }
  std::size_t rows = 0;
  for (const auto& t : driver_tables()) {
    for (const auto& r : t.rows) {
      std::string counters;
      for (auto c : r.counters) {
        if (c.empty()) continue;
        if (!counters.empty()) counters += " + ";
        counters += "`" + std::string(c) + "`";
      }
      const KindDef& k = kind_def(r.kind);
      const std::string metric =
          std::string(k.metric) + (k.kind_label.empty() ? "" : "{kind=\"" + std::string(k.kind_label) + "\"}");
      const std::string want = "| " + std::string(t.driver) + " | " + counters + " | " + metric + " | " +
                               (r.scope == Scope::kPort ? "port" : "device") + " |";
      INFO(want);
      CHECK(doc_rows.contains(want));
      ++rows;
    }
  }
  CHECK(doc_rows.size() == rows);
}
