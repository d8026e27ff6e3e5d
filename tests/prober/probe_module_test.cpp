#include <catch2/catch.hpp>

#include "collectors/prober/ondemand/probe_module.h"
#include "exporter/exposition.h"
#include "exporter/options.h"
#include "tests/lib/temp_tree.h"

using namespace rdma::collectors::prober;
using rdma::exporter::ConfigError;
using namespace std::chrono_literals;

namespace {
std::string config_error(const std::string& text) {
  try {
    parse_probe_modules(YAML::Load(text), "cfg.yml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string render(const ProbeModule* m, const ProbeResult& r) {
  rdma::exporter::MetricSink sink;
  render_probe(m, r, sink);
  std::string text;
  rdma::exporter::write_text(sink, text);
  return text;
}
}  // namespace

TEST_CASE("probe modules from YAML: both kinds, defaults, limits applied") {
  auto m = parse_probe_modules(YAML::Load(R"(
write_bw: {kind: write_bw, size: 65536, qps: 2, iterations: 5000, tx_depth: 64}
bw-5s: {kind: write_bw, duration: 5s}
write_lat: {kind: write_lat, size: 2, iterations: 1000, timeout: 20s, traffic_class: 106, service_level: 3}
)"),
                               "cfg.yml");
  REQUIRE(m.size() == 3);
  const auto& bw = m.at("write_bw");
  CHECK(bw.kind == ProbeKind::kWriteBandwidth);
  CHECK(bw.size == 65536);
  CHECK(bw.qps == 2);
  CHECK(bw.iterations == 5000);
  CHECK(bw.tx_depth == 64);
  CHECK(bw.duration == 0ms);
  CHECK(bw.timeout == 30s);
  const auto& timed = m.at("bw-5s");
  CHECK(timed.duration == 5s);
  CHECK(timed.iterations == 0);
  CHECK(timed.timeout == 30s);
  const auto& lat = m.at("write_lat");
  CHECK(lat.kind == ProbeKind::kWriteLatency);
  CHECK(lat.qps == 1);
  CHECK(lat.tx_depth == 1);
  CHECK(lat.timeout == 20s);
  CHECK(lat.traffic_class == 106);
  CHECK(lat.service_level == 3);
  CHECK(bw.traffic_class == 0);
  CHECK(bw.service_level == 0);
  CHECK(parse_probe_modules(YAML::Node(), "cfg.yml").empty());
  // a 55 s run gets the time it needs, up to the hard limit
  CHECK(parse_probe_modules(YAML::Load("m: {kind: write_bw, duration: 55s}"), "f").at("m").timeout == 65s);
}

TEST_CASE("bad probe modules name the file, line and key") {
  CHECK_THAT(config_error("[a, b]"), Catch::Contains("cfg.yml:1:1") && Catch::Contains("collectors.prober.probe_modules must be a map"));
  CHECK_THAT(config_error("m: {size: 10, iterations: 1}"), Catch::Contains("probe_modules.m.kind is required"));
  CHECK_THAT(config_error("m: {kind: read_bw, iterations: 1}"), Catch::Contains("must be write_bw or write_lat"));
  CHECK_THAT(config_error("m: {kind: write_bw}"), Catch::Contains("exactly one of `iterations` and `duration`"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, duration: 1s}"), Catch::Contains("exactly one of"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, size: 0}"), Catch::Contains("probe_modules.m.size"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, size: 16777217}"), Catch::Contains("outside 1..16777216"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, qps: 17}"), Catch::Contains("probe_modules.m.qps"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, tx_depth: 2000}"), Catch::Contains("tx_depth"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, traffic_class: 256}"),
             Catch::Contains("collectors.prober.probe_modules.m.traffic_class = 256 is outside 0..255"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, service_level: 16}"),
             Catch::Contains("collectors.prober.probe_modules.m.service_level = 16 is outside 0..15"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 10000001}"), Catch::Contains("iterations"));
  CHECK_THAT(config_error("m: {kind: write_bw, duration: 61s}"), Catch::Contains("1ms to 60s"));
  CHECK_THAT(config_error("m: {kind: write_bw, duration: soon}"), Catch::Contains("must be a duration"));
  CHECK_THAT(config_error("m: {kind: write_bw, duration: 10s, timeout: 5s}"), Catch::Contains("timeout must be longer"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, qps: many}"), Catch::Contains("must be an integer"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, colour: red}"), Catch::Contains("cfg.yml:1:") && Catch::Contains("unknown key `colour`"));
  CHECK_THAT(config_error("m: {kind: write_lat, iterations: 5, qps: 2}"), Catch::Contains("write_lat runs one write at a time"));
  CHECK_THAT(config_error("m: {kind: write_lat, duration: 5s}"), Catch::Contains("write_lat takes `iterations`"));
  CHECK_THAT(config_error("m: {kind: write_lat, iterations: 1000001}"), Catch::Contains("at most 1000000"));
  CHECK_THAT(config_error("\"bad name\": {kind: write_lat, iterations: 5}"), Catch::Contains("module name `bad name`"));
  CHECK_THAT(config_error("m: 5"), Catch::Contains("probe_modules.m must be a map"));
}

TEST_CASE("the /probe query: parameters, percent-decoding, errors") {
  std::string err;
  auto q = parse_probe_query("module=write_bw&target=node%2D2%3A9662&device=mlx5_0&port=1", err);
  REQUIRE(q);
  CHECK(*q == ProbeQuery{"write_bw", "node-2:9662", "mlx5_0", 1});
  q = parse_probe_query("target=%5Bfe80%3A%3A1%5D&module=write_lat&", err);
  REQUIRE(q);
  CHECK(q->target == "[fe80::1]");
  CHECK(q->device.empty());
  CHECK(q->port == 0);
  auto fails = [](std::string_view query, const std::string& msg) {
    std::string e;
    CHECK_FALSE(parse_probe_query(query, e));
    CHECK_THAT(e, Catch::Contains(msg));
  };
  fails("", "`module` is missing");
  fails("module=write_bw", "`target` is missing");
  fails("target=a", "`module` is missing");
  fails("module=a&module=b&target=x", "`module` given twice");
  // One policy for every extra path (exporter/query.h): an unknown parameter is a bad request.
  fails("module=write_bw&target=x&debug=true", "unknown parameter `debug`");
  fails("module=a&target=x%2", "percent-encoding");
  fails("module=a&target=x%zz", "percent-encoding");
  fails("module=a&target=x&port=0", "port must be");
  fails("module=a&target=x&port=256", "port must be");
  fails("module=a&target=x&port=1x", "port must be");
  fails("module=a&target=x%0Ay", "bad value of `target`");
  fails("module=a&target=x+y", "bad value of `target`");
  fails("module=a&target=" + std::string(300, 'x'), "bad value of `target`");
}

TEST_CASE("targets: host, host:port, IPv6 with and without brackets") {
  auto t = split_target("node-2", 9662);
  REQUIRE(t);
  CHECK(t->host == "node-2");
  CHECK(t->port == 9662);
  t = split_target("10.0.0.2:9700", 9662);
  REQUIRE(t);
  CHECK(t->host == "10.0.0.2");
  CHECK(t->port == 9700);
  t = split_target("[fe80::1]:9700", 9662);
  REQUIRE(t);
  CHECK(t->host == "fe80::1");
  CHECK(t->port == 9700);
  t = split_target("fe80::1", 9662);
  REQUIRE(t);
  CHECK(t->host == "fe80::1");
  CHECK(t->port == 9662);
  for (auto bad : {"", ":9662", "host:", "host:0", "host:65536", "host:12a", "[fe80::1", "[fe80::1]x", "[]:1", "[::1]:"})
    CHECK_FALSE(split_target(bad, 9662));
}

TEST_CASE("percentiles and the peak of full windows") {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  CHECK(percentile(v, 0) == 1);
  CHECK(percentile(v, 0.5) == 5);
  CHECK(percentile(v, 0.9) == 9);
  CHECK(percentile(v, 0.99) == 10);
  CHECK(percentile(v, 1) == 10);
  CHECK(percentile({}, 0.5) == 0);
  CHECK(percentile({7}, 0.5) == 7);
  // 0.35 s: three full windows of 0.1 s; the partial fourth (the largest) does not count
  CHECK(peak_bandwidth({100, 300, 200, 900}, 0.1, 0.35) == Approx(3000));
  CHECK(peak_bandwidth({100}, 0.1, 0.05) == 0);
  CHECK(peak_bandwidth({}, 0.1, 1) == 0);
}

TEST_CASE("a bandwidth result renders as a promtool-style scrape with exact integers") {
  ProbeModule m;
  m.name = "write_bw";
  m.size = 65536;
  m.qps = 2;
  ProbeResult r;
  r.success = true;
  r.duration_seconds = 1.5;
  r.device = "mlx5_0";
  r.port = 1;
  r.peer = "node-2";
  r.writes = 4000;
  r.bytes = 4000ull * 65536;
  r.bandwidth = 2.5e9;
  r.peak_bandwidth = 2.75e9;
  r.counters = {{"hw_counters", "np_cnp_sent", 18446744073709551615ull}, {"counters", "port_xmit_data", 65536000}};
  const auto text = render(&m, r);
  CHECK_THAT(text, Catch::Contains("# TYPE probe_success gauge\nprobe_success 1\n"));
  CHECK_THAT(text, Catch::Contains("probe_duration_seconds 1.5\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_info{module=\"write_bw\",kind=\"write_bw\",device=\"mlx5_0\",port=\"1\",peer=\"node-2\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_bandwidth_bytes_per_second 2.5e+09\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_peak_bandwidth_bytes_per_second 2.75e+09\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_written_bytes 262144000\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_writes 4000\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_qps 2\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_port_increase{source=\"hw_counters\",counter=\"np_cnp_sent\"} 18446744073709551615\n"));
  CHECK_THAT(text, !Catch::Contains("rdma_probe_failure_info{"));
  CHECK_THAT(text, !Catch::Contains("rdma_probe_rtt_seconds"));
}

TEST_CASE("a latency result renders percentiles, a failure its reason") {
  ProbeModule m;
  m.name = "lat";
  m.kind = ProbeKind::kWriteLatency;
  m.size = 2;
  ProbeResult r;
  r.success = true;
  r.device = "rxe0";
  r.port = 1;
  for (int i = 1; i <= 1000; ++i) r.rtts.push_back(i * 1e-6);
  r.writes = 1000;
  auto text = render(&m, r);
  CHECK_THAT(text, Catch::Contains("rdma_probe_rtt_seconds{percentile=\"50\"} 5e-04\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_rtt_seconds{percentile=\"0\"} 1e-06\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_rtt_seconds{percentile=\"100\"} 0.001\n"));
  CHECK_THAT(text, !Catch::Contains("bandwidth"));

  ProbeResult failed;
  failed.reason = "busy";
  failed.device = "rxe0";
  failed.port = 1;
  text = render(&m, failed);
  CHECK_THAT(text, Catch::Contains("probe_success 0\n"));
  CHECK_THAT(text, Catch::Contains("rdma_probe_failure_info{reason=\"busy\"} 1\n"));
  // an unknown module: nothing but success, duration and the reason
  failed.reason = "unknown_module";
  failed.device.clear();
  text = render(nullptr, failed);
  CHECK_THAT(text, Catch::Contains("rdma_probe_failure_info{reason=\"unknown_module\"} 1\n"));
  CHECK_THAT(text, !Catch::Contains("rdma_probe_info"));
}

TEST_CASE("the local port counters are read before and after, only those that moved are reported") {
  rdma::testing::TempTree t("probe_counters");
  const std::string port = "class/infiniband/mlx5_0/ports/1/";
  t.write(port + "link_layer", "Ethernet\n");
  t.write(port + "counters/port_xmit_data", "100\n");
  t.write(port + "counters/symbol_error", "0\n");
  t.write(port + "hw_counters/np_cnp_sent", "5\n");
  t.write(port + "hw_counters/lifespan", "10\n");
  t.write("class/infiniband/mlx5_0/ports/2/hw_counters/np_cnp_sent", "7\n");
  const auto before = read_port_counters(t.root(), "mlx5_0", 1);
  CHECK(before.size() == 4);
  CHECK(before.at({"hw_counters", "np_cnp_sent"}) == 5);
  t.write(port + "counters/port_xmit_data", "18446744073709551615\n");
  t.write(port + "hw_counters/np_cnp_sent", "9\n");
  t.write(port + "counters/symbol_error", "broken\n");
  const auto moved = counters_moved(before, read_port_counters(t.root(), "mlx5_0", 1));
  REQUIRE(moved.size() == 2);
  CHECK(moved[0].source == "counters");
  CHECK(moved[0].name == "port_xmit_data");
  CHECK(moved[0].delta == 18446744073709551515ull);
  CHECK(moved[1].name == "np_cnp_sent");
  CHECK(moved[1].delta == 4);
  CHECK(read_port_counters(t.root(), "mlx5_1", 1).empty());
  CHECK(read_port_counters(t.root(), "mlx5_0", 3).empty());
}

TEST_CASE("probe modules: size x qps is bounded by what a probe may ask of a responder") {
  CHECK(config_error("m: {kind: write_bw, iterations: 5, size: 1048576, qps: 16}").empty());  // 16 MiB
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, size: 1048577, qps: 16}"),
             Catch::Contains("size x qps = 16777232 bytes is more than the 16 MiB"));
  CHECK_THAT(config_error("m: {kind: write_bw, iterations: 5, size: 16777216, qps: 2}"), Catch::Contains("size x qps"));
  CHECK(config_error("m: {kind: write_bw, iterations: 5, size: 16777216}").empty());
}
