// The hw_counters collector on fake sysfs trees with exact values: every file, u64 end to end,
// lifespan and gauges typed right, wrap extension across a simulated wrap, netlink (a fake bulk
// reader) giving the same output as sysfs, reads counted, broken input counted, never fatal.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "collectors/hw_counters/hw_counters_collector.h"
#include "exporter/exposition.h"
#include "tests/hw_counters/helpers.h"
#include "tests/lib/unprivileged.h"

using namespace rdma::collectors::hw_counters;
using namespace hwtest;
using rdma::testing::reachable_temp_directory;
using rdma::testing::Unprivileged;

namespace {

constexpr std::uint64_t kU64Max = 18446744073709551615ull;
constexpr std::uint64_t k2p63 = 9223372036854775808ull;

// A bulk reader that serves what a test put in, like RDMA netlink would.
class FakeBulk final : public BulkPortReader {
 public:
  std::map<std::pair<std::string, std::uint32_t>, Reply> replies;
  std::uint64_t n = 0;
  Reply read_port(const std::string& device, std::uint32_t port) override {
    ++n;
    auto it = replies.find({device, port});
    if (it == replies.end()) return Reply{EINVAL, {}};
    return it->second;
  }
  std::uint64_t requests() const override { return n; }
};

std::string text(const MetricSink& s) {
  std::string out;
  rdma::exporter::write_text(s.families(), out);
  return out;
}

}  // namespace

TEST_CASE("every port and device hw_counters file is exported with its exact u64 value") {
  TempTree t;
  t.port_counter("hfi1_0", 1, "TxWait", kU64Max);
  t.port_counter("hfi1_0", 1, "SwLinkUp,32", 4294967295u);
  t.port_counter("hfi1_0", 1, "RcSeqNak", 0);
  t.port_counter("hfi1_0", 1, "DRIVER_CtxtsOpen", 3);  // hfi1's one gauge... at port level here
  t.port_counter("hfi1_0", 1, "lifespan", 12);
  t.device_counter("hfi1_0", "Cce LATriggered", k2p63);
  t.device_counter("hfi1_0", "Tx Egress Reserved 2", k2p63 + 1);
  t.device_counter("hfi1_0", "lifespan", 10);
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(t, {{"hfi1_0", "hfi1"}}));
  CHECK(s.errors.empty());
  const Labels p{{"device", "hfi1_0"}, {"port", "1"}};
  auto with = [](Labels l, std::string c) {
    l.emplace_back("counter", std::move(c));
    return l;
  };
  CHECK(u64(s.sink, "rdma_hw_counters_total", with(p, "TxWait")) == kU64Max);
  CHECK(u64(s.sink, "rdma_hw_counters_total", with(p, "SwLinkUp,32")) == 4294967295u);
  CHECK(u64(s.sink, "rdma_hw_counters_total", with(p, "RcSeqNak")) == 0);
  CHECK(u64(s.sink, "rdma_hw_counters_level", with(p, "DRIVER_CtxtsOpen")) == 3);
  CHECK_FALSE(exact(s.sink, "rdma_hw_counters_total", with(p, "DRIVER_CtxtsOpen")));
  CHECK_FALSE(exact(s.sink, "rdma_hw_counters_total", with(p, "lifespan")));
  CHECK(dbl(s.sink, "rdma_hw_counters_lifespan_seconds", p) == Approx(0.012));
  CHECK(count(s.sink, "rdma_hw_counters_total") == 3);
  const Labels d{{"device", "hfi1_0"}};
  CHECK(u64(s.sink, "rdma_hw_device_counters_total", with(d, "Cce LATriggered")) == k2p63);
  CHECK(u64(s.sink, "rdma_hw_device_counters_total", with(d, "Tx Egress Reserved 2")) == k2p63 + 1);
  CHECK(dbl(s.sink, "rdma_hw_device_counters_lifespan_seconds", d) == Approx(0.010));
  CHECK(count(s.sink, "rdma_hw_device_counters_total") == 2);
  // the text keeps the integers exact and the names as label values
  const std::string out = text(s.sink);
  CHECK(out.find("rdma_hw_counters_total{device=\"hfi1_0\",port=\"1\",counter=\"TxWait\"} 18446744073709551615\n") != std::string::npos);
  CHECK(out.find("rdma_hw_device_counters_total{device=\"hfi1_0\",counter=\"Cce LATriggered\"} 9223372036854775808\n") != std::string::npos);
  CHECK(out.find("# TYPE rdma_hw_counters_level gauge\n") != std::string::npos);
  // reads: 5 port files + 3 device files
  CHECK(u64(s.sink, "rdma_hw_counters_reads_total", {{"method", "sysfs"}}) == 8);
  CHECK(u64(s.sink, "rdma_hw_counters_reads_total", {{"method", "netlink"}}) == 0);
}

TEST_CASE("gauge-typed counters per driver: bnxt_re active_*/watermark_*, mana current_rate") {
  TempTree t;
  t.port_counter("bnxt_re0", 1, "active_qps", 17);
  t.port_counter("bnxt_re0", 1, "watermark_qps", 40);
  t.port_counter("bnxt_re0", 1, "db_fifo_register", 3);
  t.port_counter("bnxt_re0", 1, "rx_pkts", 99);
  t.port_counter("mana_0", 1, "current_rate", 200000);
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(t, {{"bnxt_re0", "bnxt_re"}, {"mana_0", "mana"}}));
  CHECK(u64(s.sink, "rdma_hw_counters_level", {{"device", "bnxt_re0"}, {"port", "1"}, {"counter", "active_qps"}}) == 17);
  CHECK(u64(s.sink, "rdma_hw_counters_level", {{"device", "bnxt_re0"}, {"port", "1"}, {"counter", "watermark_qps"}}) == 40);
  CHECK(u64(s.sink, "rdma_hw_counters_level", {{"device", "bnxt_re0"}, {"port", "1"}, {"counter", "db_fifo_register"}}) == 3);
  CHECK(u64(s.sink, "rdma_hw_counters_level", {{"device", "mana_0"}, {"port", "1"}, {"counter", "current_rate"}}) == 200000);
  CHECK(u64(s.sink, "rdma_hw_counters_total", {{"device", "bnxt_re0"}, {"port", "1"}, {"counter", "rx_pkts"}}) == 99);
  CHECK(count(s.sink, "rdma_hw_counters_total") == 1);
}

TEST_CASE("mlx5 32-bit Q counters are extended across a simulated wrap, 64-bit ones are not") {
  TempTree t;
  t.port_counter("mlx5_0", 1, "rx_write_requests", 4294967000u);
  t.port_counter("mlx5_0", 1, "out_of_buffer", 4294967295u);
  t.port_counter("mlx5_0", 1, "np_cnp_sent", 5000000000ull);
  HwCountersCollector col(sysfs_only());
  const auto h = model_of(t, {{"mlx5_0", "mlx5"}});
  const Labels p{{"device", "mlx5_0"}, {"port", "1"}};
  auto c = [&](const std::string& n) { return with(p, "counter", n); };
  auto s1 = collect(col, h);
  CHECK(u64(s1.sink, "rdma_hw_counters_total", c("rx_write_requests")) == 4294967000u);
  CHECK_FALSE(exact(s1.sink, "rdma_hw_counters_wraps_total", c("rx_write_requests")));  // not wrapped yet
  CHECK(u64(s1.sink, "rdma_out_of_buffer_drops_total", p) == 4294967295u);

  // the hardware counters wrap: 4294967000 + 396 = 2^32 + 100
  t.port_counter("mlx5_0", 1, "rx_write_requests", 100);
  t.port_counter("mlx5_0", 1, "out_of_buffer", 6);
  t.port_counter("mlx5_0", 1, "np_cnp_sent", 5000000001ull);
  auto s2 = collect(col, h);
  CHECK(u64(s2.sink, "rdma_hw_counters_total", c("rx_write_requests")) == 4294967296ull + 100);
  CHECK(u64(s2.sink, "rdma_hw_counters_wraps_total", c("rx_write_requests")) == 1);
  CHECK(u64(s2.sink, "rdma_hw_counters_total", c("out_of_buffer")) == 4294967296ull + 6);
  CHECK(u64(s2.sink, "rdma_out_of_buffer_drops_total", p) == 4294967296ull + 6);  // normalised too
  CHECK(u64(s2.sink, "rdma_hw_counters_total", c("np_cnp_sent")) == 5000000001ull);
  CHECK_FALSE(exact(s2.sink, "rdma_hw_counters_wraps_total", c("np_cnp_sent")));

  // a second wrap
  t.port_counter("mlx5_0", 1, "rx_write_requests", 7);
  auto s3 = collect(col, h);
  CHECK(u64(s3.sink, "rdma_hw_counters_total", c("rx_write_requests")) == 2 * 4294967296ull + 7);
  CHECK(u64(s3.sink, "rdma_hw_counters_wraps_total", c("rx_write_requests")) == 2);

  // the device vanishes for a scrape (driver reload): the state goes with it
  collect(col, model_of(t, {}));
  t.port_counter("mlx5_0", 1, "rx_write_requests", 3);
  auto s4 = collect(col, h);
  CHECK(u64(s4.sink, "rdma_hw_counters_total", c("rx_write_requests")) == 3);

  // and with --no-...wrap-extension the raw values are exported
  Settings raw = sysfs_only();
  raw.wrap_extension = false;
  HwCountersCollector plain(raw);
  collect(plain, h);
  t.port_counter("mlx5_0", 1, "rx_write_requests", 1);
  auto s5 = collect(plain, h);
  CHECK(u64(s5.sink, "rdma_hw_counters_total", c("rx_write_requests")) == 1);
  CHECK(count(s5.sink, "rdma_hw_counters_wraps_total") == 0);
}

TEST_CASE("a bulk (netlink) read gives the same output as sysfs, with one request per port") {
  TempTree t;
  const std::vector<std::pair<std::string, std::uint64_t>> rxe{
      {"sent_pkts", 139562}, {"rcvd_pkts", 13568}, {"duplicate_request", 0}, {"completer_retry_err", 16},
      {"rdma_sends", k2p63}, {"rdma_recvs", kU64Max}};
  for (const char* dev : {"rxe0", "rxe1"}) {
    for (const auto& [n, v] : rxe) t.port_counter(dev, 1, n, v);
    t.port_counter(dev, 1, "lifespan", 12);
  }
  const auto h = model_of(t, {{"rxe0", "rxe"}, {"rxe1", "rxe"}});

  HwCountersCollector by_sysfs(sysfs_only());
  auto a = collect(by_sysfs, h);

  auto bulk = std::make_unique<FakeBulk>();
  for (const char* dev : {"rxe0", "rxe1"}) {
    BulkPortReader::Reply r;
    // netlink lists counters in the driver's order, without lifespan
    for (const auto& [n, v] : rxe) r.counters.push_back({n, rdma::Result<std::uint64_t>::success(v)});
    bulk->replies[{dev, 1}] = r;
  }
  FakeBulk* fb = bulk.get();
  Settings st;
  st.netlink = NetlinkMode::kOn;
  HwCountersCollector by_netlink(st, std::move(bulk));
  auto b = collect(by_netlink, h);
  CHECK(b.errors.empty());
  CHECK(fb->n == 2);  // one request per port

  // identical apart from the reads self-metric
  auto strip = [](std::string s) {
    auto at = s.find("# HELP rdma_hw_counters_reads_total");
    return s.substr(0, at);
  };
  CHECK(strip(text(a.sink)) == strip(text(b.sink)));
  CHECK(u64(a.sink, "rdma_hw_counters_reads_total", {{"method", "sysfs"}}) == 14);  // 7 files x 2 ports
  CHECK(u64(b.sink, "rdma_hw_counters_reads_total", {{"method", "netlink"}}) == 2);
  CHECK(u64(b.sink, "rdma_hw_counters_reads_total", {{"method", "sysfs"}}) == 2);  // lifespan only
  CHECK(u64(b.sink, "rdma_transport_transmit_packets_total", {{"device", "rxe0"}, {"port", "1"}}) == 139562);
  CHECK(u64(b.sink, "rdma_retransmissions_total", {{"device", "rxe0"}, {"port", "1"}}) == 16);
}

TEST_CASE("netlink-only optional counters are exported and normalised, a failed request falls back to sysfs") {
  TempTree t;
  t.port_counter("mlx5_0", 1, "out_of_sequence", 4);
  t.port_counter("mlx5_0", 1, "lifespan", 10);
  t.port_counter("mlx5_1", 1, "out_of_sequence", 5);
  t.port_counter("mlx5_1", 1, "lifespan", 10);
  auto bulk = std::make_unique<FakeBulk>();
  BulkPortReader::Reply r;
  r.counters = {{"out_of_sequence", rdma::Result<std::uint64_t>::success(4)},
                {"cc_rx_ce_pkts", rdma::Result<std::uint64_t>::success(77)},
                {"rdma_tx_packets", rdma::Result<std::uint64_t>::success(k2p63)}};
  bulk->replies[{"mlx5_0", 1}] = r;  // mlx5_1: EINVAL
  Settings st;
  st.netlink = NetlinkMode::kAuto;
  HwCountersCollector col(st, std::move(bulk));
  auto s = collect(col, model_of(t, {{"mlx5_0", "mlx5"}, {"mlx5_1", "mlx5"}}));
  CHECK(u64(s.sink, "rdma_hw_counters_total", {{"device", "mlx5_0"}, {"port", "1"}, {"counter", "cc_rx_ce_pkts"}}) == 77);
  CHECK(u64(s.sink, "rdma_roce_ecn_marked_packets_total", {{"device", "mlx5_0"}, {"port", "1"}}) == 77);
  CHECK(u64(s.sink, "rdma_transport_transmit_packets_total", {{"device", "mlx5_0"}, {"port", "1"}}) == k2p63);
  CHECK(u64(s.sink, "rdma_hw_counters_total", {{"device", "mlx5_1"}, {"port", "1"}, {"counter", "out_of_sequence"}}) == 5);
  CHECK(s.errors == std::map<std::string, std::uint64_t>{{"netlink", 1}});
  CHECK(u64(s.sink, "rdma_hw_counters_reads_total", {{"method", "netlink"}}) == 2);
  CHECK(u64(s.sink, "rdma_hw_counters_reads_total", {{"method", "sysfs"}}) == 3);  // lifespan + 2 files of mlx5_1
}

TEST_CASE("broken and vanishing input is counted, the rest still exported") {
  TempTree t;
  t.port_counter("rxe0", 1, "sent_pkts", 10);
  t.write(t.port_path("rxe0", 1) + "/hw_counters/rcvd_pkts", "12abc\n");
  t.write(t.port_path("rxe0", 1) + "/hw_counters/send_err", "-1\n");
  t.write(t.port_path("rxe0", 1) + "/hw_counters/link_downed", "");
  std::filesystem::create_directories(t.port_path("rxe0", 1) + "/hw_counters/duplicate_request");
  std::filesystem::create_symlink("/nonexistent/x", t.port_path("rxe0", 1) + "/hw_counters/rdma_sends");
  t.port_dir("rxe1", 1);  // no hw_counters at all: nothing, and no error
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(t, {{"rxe0", "rxe"}, {"rxe1", "rxe"}, {"gone0", "mlx5", 2}}));
  CHECK(u64(s.sink, "rdma_hw_counters_total", {{"device", "rxe0"}, {"port", "1"}, {"counter", "sent_pkts"}}) == 10);
  CHECK(count(s.sink, "rdma_hw_counters_total") == 1);
  std::uint64_t total = 0;
  for (auto& [k, v] : s.errors) total += v;
  CHECK(total == 5);
  CHECK(s.errors.at("malformed") >= 3);
  CHECK(count(s.sink, "rdma_transport_receive_packets_total") == 0);
}

TEST_CASE("an unreadable hw_counters directory is an error, not a crash") {
  TempTree t(reachable_temp_directory());  // not under a TMPDIR in /root (mode 0700)
  chmod(t.root().c_str(), 0755);  // the tree is readable by nobody, but for the one directory
  t.port_counter("rxe0", 1, "sent_pkts", 1);
  t.port_counter("rxe1", 1, "sent_pkts", 2);
  chmod((t.port_path("rxe0", 1) + "/hw_counters").c_str(), 0);
  HwCountersCollector col(sysfs_only());
  Scrape s;
  {
    const Unprivileged as_nobody;  // root reads a mode-000 directory
    s = collect(col, model_of(t, {{"rxe0", "rxe"}, {"rxe1", "rxe"}}));
  }
  chmod((t.port_path("rxe0", 1) + "/hw_counters").c_str(), 0755);
  CHECK(s.errors == std::map<std::string, std::uint64_t>{{"permission_denied", 1}});
  CHECK(u64(s.sink, "rdma_hw_counters_total", {{"device", "rxe1"}, {"port", "1"}, {"counter", "sent_pkts"}}) == 2);
}

TEST_CASE("ionic: 2^64-1 is the driver's undecodable value: no sample, counted, the rest exported") {
  TempTree t;
  t.port_counter("ionic_0", 1, "req_tx_retry_excd_err", kU64Max);  // ionic_v1_stat_val() gave up
  t.port_counter("ionic_0", 1, "resp_rx_outouf_seq", kU64Max);
  t.port_counter("ionic_0", 1, "resp_rx_dup_request", 12);
  HwCountersCollector col(sysfs_only());
  auto s = collect(col, model_of(t, {{"ionic_0", "ionic"}}));
  const Labels p{{"device", "ionic_0"}, {"port", "1"}};
  CHECK(count(s.sink, "rdma_hw_counters_total") == 1);
  CHECK(u64(s.sink, "rdma_duplicate_requests_total", p) == 12);
  CHECK(count(s.sink, "rdma_qp_retries_exceeded_total") == 0);
  CHECK(count(s.sink, "rdma_out_of_sequence_packets_total") == 0);
  CHECK(s.errors == std::map<std::string, std::uint64_t>{{"invalid_value", 2}});

  // the same value from another driver is a real count (hfi1 CNTR_MAX, a saturated counter)
  TempTree t2;
  t2.port_counter("rxe0", 1, "retry_exceeded_err", kU64Max);
  auto s2 = collect(col, model_of(t2, {{"rxe0", "rxe"}}));
  CHECK(s2.errors.empty());
  CHECK(u64(s2.sink, "rdma_qp_retries_exceeded_total", with({{"device", "rxe0"}, {"port", "1"}}, "kind", "transport")) ==
        kU64Max);
}

TEST_CASE("ionic: narrow firmware counters are extended with the width their values show") {
  TempTree t;
  t.port_counter("ionic_0", 1, "req_tx_retry_excd_err", 250);     // an 8-bit counter near its top
  t.port_counter("ionic_0", 1, "resp_rx_outouf_seq", 60000);      // 16-bit
  t.port_counter("ionic_0", 1, "tx_rdma_ucast_pkts", 5000000000);  // seen above 2^32: 64-bit
  t.port_counter("ionic_0", 1, "tx_rdma_mcast_pkts", 10);
  t.port_counter("ionic_0", 1, "resp_rx_dup_request", 100);       // low in its range
  HwCountersCollector col(sysfs_only());
  const auto h = model_of(t, {{"ionic_0", "ionic"}});
  const Labels p{{"device", "ionic_0"}, {"port", "1"}};
  auto c = [&](const std::string& n) { return with(p, "counter", n); };
  const Labels transport = with(p, "kind", "transport");
  collect(col, h);

  t.port_counter("ionic_0", 1, "req_tx_retry_excd_err", 4);    // 250 -> 256 + 4
  t.port_counter("ionic_0", 1, "resp_rx_outouf_seq", 100);     // 60000 -> 65536 + 100
  t.port_counter("ionic_0", 1, "tx_rdma_ucast_pkts", 7);       // a 64-bit counter going back: a reset
  t.port_counter("ionic_0", 1, "resp_rx_dup_request", 3);      // from the lower half: a reset, not a wrap
  auto s = collect(col, h);
  CHECK(u64(s.sink, "rdma_hw_counters_total", c("req_tx_retry_excd_err")) == 260);
  CHECK(u64(s.sink, "rdma_hw_counters_wraps_total", c("req_tx_retry_excd_err")) == 1);
  CHECK(u64(s.sink, "rdma_qp_retries_exceeded_total", transport) == 260);
  CHECK(u64(s.sink, "rdma_hw_counters_total", c("resp_rx_outouf_seq")) == 65636);
  CHECK(u64(s.sink, "rdma_out_of_sequence_packets_total", p) == 65636);
  CHECK(u64(s.sink, "rdma_hw_counters_total", c("tx_rdma_ucast_pkts")) == 7);
  CHECK_FALSE(exact(s.sink, "rdma_hw_counters_wraps_total", c("tx_rdma_ucast_pkts")));
  CHECK(u64(s.sink, "rdma_transport_transmit_packets_total", p) == 17);
  CHECK(u64(s.sink, "rdma_hw_counters_total", c("resp_rx_dup_request")) == 3);
  CHECK_FALSE(exact(s.sink, "rdma_hw_counters_wraps_total", c("resp_rx_dup_request")));

  // a second 8-bit wrap adds another 256
  t.port_counter("ionic_0", 1, "req_tx_retry_excd_err", 200);
  collect(col, h);
  t.port_counter("ionic_0", 1, "req_tx_retry_excd_err", 1);
  auto s2 = collect(col, h);
  CHECK(u64(s2.sink, "rdma_hw_counters_total", c("req_tx_retry_excd_err")) == 2 * 256 + 1);
  CHECK(u64(s2.sink, "rdma_hw_counters_wraps_total", c("req_tx_retry_excd_err")) == 2);
}
