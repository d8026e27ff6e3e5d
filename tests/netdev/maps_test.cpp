// Per-driver name maps: string tables as SIOCETHTOOL returns them (32-byte entries) plus values,
// through decode_strings -> map_stats -> emit_mapped, the code path of a scrape.
#include <catch2/catch.hpp>

#include <numeric>

#include "collectors/netdev/netdev_metrics.h"
#include "sources/ethtool/ethtool_ioctl.h"
#include "sources/ethtool/stat_map.h"
#include "tests/netdev/helpers.h"

using namespace rdma;
using namespace ndtest;  // find, with, kBase, Labels, MetricSink

namespace {

// Decodes the table, maps it for `driver`, gives stat i the value values[i], emits.
MetricSink run(const std::string& driver, const std::vector<std::string>& table, const std::vector<std::uint64_t>& values,
               bool skip_link_pause = false) {
  auto block = ndtest::string_block(table);
  auto names = ethtool::decode_strings(block, table.size());
  REQUIRE(names == table);
  auto mapped = ethtool::map_stats(driver, names);
  MetricSink out;
  collectors::netdev::emit_mapped(kBase, mapped, values, skip_link_pause, out);
  return out;
}

std::vector<std::uint64_t> iota_values(std::size_t n, std::uint64_t start) {
  std::vector<std::uint64_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE("mlx5 string table maps to typed PFC families with direction and priority", "[fixtures]") {
  std::vector<std::string> table{"rx_packets", "rx_out_of_buffer", "rx_pause_ctrl_phy", "rx_global_pause",
                                 "rx_global_pause_duration", "tx_global_pause", "tx_global_pause_duration",
                                 "rx_global_pause_transition"};
  for (int p = 0; p < 8; ++p)
    for (const char* f : {"rx_prio%_pause", "rx_prio%_pause_duration", "tx_prio%_pause", "tx_prio%_pause_duration",
                          "rx_prio%_pause_transition"}) {
      std::string s = f;
      s.replace(s.find('%'), 1, std::to_string(p));
      table.push_back(s);
    }
  table.insert(table.end(), {"tx_pause_storm_warning_events", "tx_pause_storm_error_events", "rx_prio3_buf_discard",
                             "rx_prio3_cong_discard", "rx_prio3_marked", "rx_prio3_bytes"});
  auto values = iota_values(table.size(), 1000);
  auto index = [&](const std::string& n) { return static_cast<std::size_t>(std::find(table.begin(), table.end(), n) - table.begin()); };
  values[index("tx_prio7_pause")] = UINT64_MAX;          // exact u64 on the way out
  values[index("rx_prio3_pause_duration")] = 2500000;    // µs -> 2.5 s
  auto out = run("mlx5_core", table, values);

  auto rx3 = find(out, "rdma_netdev_pfc_pause_frames_total", with({{"direction", "rx"}, {"priority", "3"}}));
  REQUIRE(rx3);
  CHECK(rx3->type == exporter::MetricType::kCounter);
  CHECK(rx3->u64() == values[index("rx_prio3_pause")]);
  CHECK(find(out, "rdma_netdev_pfc_pause_frames_total", with({{"direction", "tx"}, {"priority", "7"}}))->u64() == UINT64_MAX);
  CHECK(find(out, "rdma_netdev_pfc_pause_duration_seconds_total", with({{"direction", "rx"}, {"priority", "3"}}))->number() == 2.5);
  CHECK(find(out, "rdma_netdev_pfc_pause_transitions_total", with({{"direction", "rx"}, {"priority", "5"}}))->u64() ==
        values[index("rx_prio5_pause_transition")]);
  CHECK(find(out, "rdma_netdev_pause_storm_events_total", with({{"direction", "tx"}, {"level", "warning"}}))->u64() ==
        values[index("tx_pause_storm_warning_events")]);
  CHECK(find(out, "rdma_netdev_pause_storm_events_total", with({{"level", "error"}}))->u64() ==
        values[index("tx_pause_storm_error_events")]);
  CHECK(find(out, "rdma_netdev_priority_discards_total", with({{"priority", "3"}, {"cause", "buffer"}}))->u64() ==
        values[index("rx_prio3_buf_discard")]);
  CHECK(find(out, "rdma_netdev_priority_discards_total", with({{"priority", "3"}, {"cause", "congestion"}}))->u64() ==
        values[index("rx_prio3_cong_discard")]);
  CHECK(find(out, "rdma_netdev_priority_ecn_marked_packets_total", with({{"priority", "3"}}))->u64() ==
        values[index("rx_prio3_marked")]);
  CHECK(find(out, "rdma_netdev_out_of_buffer_total", kBase)->u64() == values[index("rx_out_of_buffer")]);
  CHECK(find(out, "rdma_netdev_link_pause_frames_total", with({{"direction", "tx"}}))->u64() == values[index("tx_global_pause")]);
  CHECK(find(out, "rdma_netdev_link_pause_transitions_total", with({{"direction", "rx"}}))->u64() ==
        values[index("rx_global_pause_transition")]);
  // 8 priorities x 2 directions, nothing for unmapped names
  CHECK(ndtest::count(out, "rdma_netdev_pfc_pause_frames_total") == 16);
  CHECK(ndtest::count(out, "rdma_netdev_pfc_pause_transitions_total") == 8);
  std::size_t samples = out.sample_count();
  CHECK(samples == 16 + 16 + 8 + 2 + 2 + 1 + 1 + 2 + 2 + 1);

  // With the standard netlink pause statistics exported, the driver's link pause frames are not.
  auto skipped = run("mlx5_core", table, values, true);
  CHECK_FALSE(find(skipped, "rdma_netdev_link_pause_frames_total"));
  CHECK(find(skipped, "rdma_netdev_link_pause_duration_seconds_total", with({{"direction", "rx"}})));
}

TEST_CASE("bnxt_en string table", "[fixtures]") {
  std::vector<std::string> table{"rx_pause_frames", "tx_pause_frames", "rx_pfc_frames", "rx_pfc_ena_frames_pri3",
                                 "tx_pfc_ena_frames_pri3", "pfc_pri3_rx_duration_us", "pfc_pri3_rx_transitions",
                                 "pfc_pri3_tx_duration_us", "pfc_pri3_tx_transitions", "rx_discard_packets_cos0"};
  auto values = iota_values(table.size(), 7);
  values[5] = 1500000;
  auto out = run("bnxt_en", table, values);
  CHECK(find(out, "rdma_netdev_pfc_pause_frames_total", with({{"direction", "rx"}, {"priority", "3"}}))->u64() == values[3]);
  CHECK(find(out, "rdma_netdev_pfc_pause_frames_total", with({{"direction", "tx"}, {"priority", "3"}}))->u64() == values[4]);
  CHECK(find(out, "rdma_netdev_pfc_pause_duration_seconds_total", with({{"direction", "rx"}, {"priority", "3"}}))->number() == 1.5);
  CHECK(find(out, "rdma_netdev_pfc_pause_transitions_total", with({{"direction", "tx"}, {"priority", "3"}}))->u64() == values[8]);
  CHECK(find(out, "rdma_netdev_link_pause_frames_total", with({{"direction", "rx"}}))->u64() == values[0]);
  CHECK(out.sample_count() == 8);  // rx_pfc_frames (all priorities) and CoS counters are not typed
}

TEST_CASE("ice string table: xoff = pause, xon = resume", "[fixtures]") {
  std::vector<std::string> table{"rx_bytes.nic", "link_xon_rx.nic", "link_xoff_rx.nic", "link_xon_tx.nic", "link_xoff_tx.nic"};
  for (int p = 0; p < 8; ++p)
    for (const char* d : {"tx", "rx"})
      for (const char* k : {"xon", "xoff"}) table.push_back(std::string(d) + "_priority_" + std::to_string(p) + "_" + k + ".nic");
  auto values = iota_values(table.size(), 100);
  auto out = run("ice", table, values);
  auto at = [&](const std::string& n) { return values[static_cast<std::size_t>(std::find(table.begin(), table.end(), n) - table.begin())]; };
  CHECK(find(out, "rdma_netdev_pfc_pause_frames_total", with({{"direction", "rx"}, {"priority", "3"}}))->u64() == at("rx_priority_3_xoff.nic"));
  CHECK(find(out, "rdma_netdev_pfc_resume_frames_total", with({{"direction", "tx"}, {"priority", "6"}}))->u64() == at("tx_priority_6_xon.nic"));
  CHECK(find(out, "rdma_netdev_link_pause_frames_total", with({{"direction", "tx"}}))->u64() == at("link_xoff_tx.nic"));
  CHECK(find(out, "rdma_netdev_link_resume_frames_total", with({{"direction", "rx"}}))->u64() == at("link_xon_rx.nic"));
  CHECK(out.sample_count() == 32 + 4);
}

TEST_CASE("a driver without rules maps nothing, the allow-list picks raw stats", "[fixtures]") {
  std::vector<std::string> table{"peer_ifindex", "rx_queue_0_xdp_packets", "rx_prio3_pause"};
  CHECK(ethtool::map_stats("veth", table).empty());
  CHECK_FALSE(ethtool::driver_known("veth"));
  CHECK(ethtool::driver_known("mlx5_core"));
  auto extra = collectors::netdev::select_extra(table, {"rx_queue_0_xdp_packets", "absent_stat", "rx_queue_0_xdp_packets"});
  REQUIRE(extra.size() == 1);
  MetricSink out;
  collectors::netdev::emit_extra(kBase, extra, std::vector<std::uint64_t>{2, UINT64_MAX, 5}, out);
  auto v = find(out, "rdma_netdev_ethtool_stat", with({{"stat", "rx_queue_0_xdp_packets"}}));
  REQUIRE(v);
  CHECK(v->type == exporter::MetricType::kGauge);
  CHECK(v->u64() == UINT64_MAX);
  CHECK(out.sample_count() == 1);
}

TEST_CASE("a name listed twice in a table gives one series", "[fixtures]") {
  auto out = run("mlx5_core", {"rx_prio3_pause", "rx_prio3_pause"}, {1, 2});
  CHECK(out.sample_count() == 1);
  CHECK(find(out, "rdma_netdev_pfc_pause_frames_total")->u64() == 1);
}

TEST_CASE("pattern matching takes one priority digit 0-7", "[unit]") {
  int p = -1;
  CHECK(ethtool::match_pattern("rx_prio{p}_pause", "rx_prio0_pause", &p));
  CHECK(p == 0);
  CHECK(ethtool::match_pattern("rx_prio{p}_pause", "rx_prio7_pause", &p));
  CHECK(p == 7);
  CHECK_FALSE(ethtool::match_pattern("rx_prio{p}_pause", "rx_prio8_pause", &p));
  CHECK_FALSE(ethtool::match_pattern("rx_prio{p}_pause", "rx_prio10_pause", &p));
  CHECK_FALSE(ethtool::match_pattern("rx_prio{p}_pause", "rx_prio3_pause_duration", &p));
  CHECK_FALSE(ethtool::match_pattern("rx_prio{p}_pause", "rx_prio_pause", &p));
  CHECK(ethtool::match_pattern("rx_out_of_buffer", "rx_out_of_buffer", nullptr));
}

TEST_CASE("GSTRINGS blocks: 32-byte names without NUL, short data", "[unit]") {
  const std::string full(32, 'x');
  auto block = ndtest::string_block({"a", full, "rx_prio3_pause"});
  auto names = ethtool::decode_strings(block, 3);
  REQUIRE(names.size() == 3);
  CHECK(names[1] == full);
  CHECK(names[2] == "rx_prio3_pause");
  // fewer bytes than count * 32: only the complete entries
  CHECK(ethtool::decode_strings(std::span(block).first(70), 3).size() == 2);
  CHECK(ethtool::decode_strings({}, 5).empty());
}
