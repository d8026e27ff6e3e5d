// ethtool netlink link state and FEC replies in the kernel's attribute layout (linkstate.c
// linkstate_fill_reply, fec.c fec_fill_reply / fec_put_stats / fec_put_hist), the label tables,
// the samples they give, and the carrier counters of a fixture tree through the collector.
#include <catch2/catch.hpp>

#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <cerrno>

#include "collectors/netdev/link_metrics.h"
#include "collectors/netdev/netdev_metrics.h"
#include "sources/ethtool/link_health.h"
#include "tests/netdev/helpers.h"

using namespace rdma;
using namespace ndtest;

namespace {

constexpr std::uint16_t kFamily = 27;

std::vector<std::uint8_t> genl_reply(std::uint8_t cmd, std::uint16_t header_attr, const std::function<void(nlmsghdr*)>& body) {
  genlmsghdr g{};
  g.cmd = cmd;
  g.version = ETHTOOL_GENL_VERSION;
  return netlink::build_request(kFamily, &g, sizeof g, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, header_attr);  // ethnl_fill_reply_header
    mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_DEV_INDEX, 4);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, "ens1f0np0");
    mnl_attr_nest_end(nlh, hdr);
    body(nlh);
  });
}

struct LinkSpec {
  std::optional<std::uint8_t> link = 0, state, substate;
  std::optional<std::uint32_t> sqi, sqi_max, down_count;
};
std::vector<std::uint8_t> linkstate_reply(const LinkSpec& s) {
  return genl_reply(ETHTOOL_MSG_LINKSTATE_GET_REPLY, ETHTOOL_A_LINKSTATE_HEADER, [&](nlmsghdr* nlh) {
    if (s.link) mnl_attr_put_u8(nlh, ETHTOOL_A_LINKSTATE_LINK, *s.link);
    if (s.sqi) mnl_attr_put_u32(nlh, ETHTOOL_A_LINKSTATE_SQI, *s.sqi);
    if (s.sqi_max) mnl_attr_put_u32(nlh, ETHTOOL_A_LINKSTATE_SQI_MAX, *s.sqi_max);
    if (s.state) mnl_attr_put_u8(nlh, ETHTOOL_A_LINKSTATE_EXT_STATE, *s.state);
    if (s.substate) mnl_attr_put_u8(nlh, ETHTOOL_A_LINKSTATE_EXT_SUBSTATE, *s.substate);
    if (s.down_count) mnl_attr_put_u32(nlh, ethtool::kLinkStateExtDownCount, *s.down_count);
  });
}

// nla_put_64bit on an architecture without efficient unaligned access puts a PAD attribute
// first when the payload would not be 8-byte aligned: `pad` adds one, as such a kernel would.
void put_u64_array(nlmsghdr* nlh, std::uint16_t type, const std::vector<std::uint64_t>& v, bool pad, std::uint16_t pad_type) {
  if (pad) mnl_attr_put(nlh, pad_type, 0, nullptr);
  mnl_attr_put(nlh, type, v.size() * 8, v.data());
}

struct Bin {
  std::uint32_t low, high;
  std::uint64_t value;
  bool value_u32 = false;  // nla_put_uint of a small value: 4 bytes
  std::vector<std::uint64_t> lanes;
};
// An mlx5-like RS-FEC reply: totals with 4 lanes of corrected blocks and bits, uncorrectable
// without lanes, and a histogram with per-lane values in one bin.
std::vector<std::uint8_t> fec_reply(bool pad, const std::vector<Bin>& hist, std::optional<std::uint32_t> active = ETHTOOL_LINK_MODE_FEC_RS_BIT) {
  return genl_reply(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, [&](nlmsghdr* nlh) {
    nlattr* modes = mnl_attr_nest_start(nlh, ETHTOOL_A_FEC_MODES);  // a compact bitset: skipped
    mnl_attr_put(nlh, ETHTOOL_A_BITSET_NOMASK, 0, nullptr);
    mnl_attr_put_u32(nlh, ETHTOOL_A_BITSET_SIZE, 92);
    mnl_attr_nest_end(nlh, modes);
    mnl_attr_put_u8(nlh, ETHTOOL_A_FEC_AUTO, 0);
    if (active) mnl_attr_put_u32(nlh, ETHTOOL_A_FEC_ACTIVE, *active);
    nlattr* stats = mnl_attr_nest_start(nlh, ETHTOOL_A_FEC_STATS);
    put_u64_array(nlh, ETHTOOL_A_FEC_STAT_CORRECTED, {1000, 100, 200, 300, 400}, pad, ETHTOOL_A_FEC_STAT_PAD);
    put_u64_array(nlh, ETHTOOL_A_FEC_STAT_UNCORR, {UINT64_MAX}, pad, ETHTOOL_A_FEC_STAT_PAD);
    put_u64_array(nlh, ETHTOOL_A_FEC_STAT_CORR_BITS, {}, pad, ETHTOOL_A_FEC_STAT_PAD);  // cnt 0: not counted
    for (const auto& b : hist) {
      nlattr* bin = mnl_attr_nest_start(nlh, ethtool::kFecStatHist);
      mnl_attr_put_u32(nlh, ethtool::kFecHistBinLow, b.low);
      mnl_attr_put_u32(nlh, ethtool::kFecHistBinHigh, b.high);
      if (b.value_u32) mnl_attr_put_u32(nlh, ethtool::kFecHistBinValue, static_cast<std::uint32_t>(b.value));
      else mnl_attr_put_u64(nlh, ethtool::kFecHistBinValue, b.value);
      if (!b.lanes.empty()) put_u64_array(nlh, ethtool::kFecHistBinValuePerLane, b.lanes, pad, 1 /* ETHTOOL_A_FEC_HIST_PAD */);
      mnl_attr_nest_end(nlh, bin);
    }
    mnl_attr_nest_end(nlh, stats);
  });
}

const std::vector<Bin> kHist{{0, 0, 123456789, false, {}}, {1, 3, 77, true, {10, 20, 30, 17}}, {4, 15, 5, true, {}}};

}  // namespace

TEST_CASE("ethtool linkstate reply: link down with reason, SQI, down count", "[fixtures]") {
  auto r = ethtool::decode_linkstate_reply(linkstate_reply(
      {.link = 0, .state = ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY, .substate = ETHTOOL_LINK_EXT_SUBSTATE_BSI_SERDES_ALOS,
       .sqi = 3, .sqi_max = 7, .down_count = 41}));
  REQUIRE(r.ok());
  CHECK(r.value.link == false);
  CHECK(r.value.ext_state == ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY);
  CHECK(r.value.down_count == 41u);
  MetricSink out;
  CHECK(collectors::netdev::emit_linkstate(kBase, r.value, out));
  CHECK(find(out, "rdma_netdev_link_up", kBase)->number() == 0);
  CHECK(find(out, "rdma_netdev_link_sqi", kBase)->number() == 3);
  CHECK(find(out, "rdma_netdev_link_sqi_max", kBase)->number() == 7);
  CHECK(find(out, "rdma_netdev_link_down_events_total", kBase)->u64() == 41);
  CHECK(find(out, "rdma_netdev_link_down_reason_info", with({{"reason", "bad_signal_integrity"}, {"detail", "serdes_alos"}})));

  // A link that is up: no reason, no SQI (no PHY), no down count (kernel 6.1): only the state.
  auto up = ethtool::decode_linkstate_reply(linkstate_reply({.link = 1}));
  REQUIRE(up.ok());
  MetricSink up_out;
  CHECK_FALSE(collectors::netdev::emit_linkstate(kBase, up.value, up_out));
  CHECK(find(up_out, "rdma_netdev_link_up", kBase)->number() == 1);
  CHECK(up_out.sample_count() == 1);

  // A state without substate, and one newer than the table: labels, never dropped.
  auto cable = ethtool::decode_linkstate_reply(linkstate_reply({.state = ETHTOOL_LINK_EXT_STATE_NO_CABLE}));
  REQUIRE(cable.ok());
  MetricSink cable_out;
  collectors::netdev::emit_linkstate(kBase, cable.value, cable_out);
  CHECK(find(cable_out, "rdma_netdev_link_down_reason_info", with({{"reason", "no_cable"}, {"detail", ""}})));
  CHECK(ethtool::ext_state_label(200) == "state_200");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE, 9) == "substate_9");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_NO_CABLE, 1) == "substate_1");
}

TEST_CASE("link ext state tables mirror the uapi enums", "[unit]") {
  CHECK(ethtool::ext_state_label(ETHTOOL_LINK_EXT_STATE_AUTONEG) == "autoneg");
  CHECK(ethtool::ext_state_label(ETHTOOL_LINK_EXT_STATE_LINK_TRAINING_FAILURE) == "link_training_failure");
  CHECK(ethtool::ext_state_label(ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE) == "cable_issue");
  CHECK(ethtool::ext_state_label(ETHTOOL_LINK_EXT_STATE_MODULE) == "module");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_AUTONEG, ETHTOOL_LINK_EXT_SUBSTATE_AN_NO_HCD) == "no_hcd");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_LINK_TRAINING_FAILURE, ETHTOOL_LINK_EXT_SUBSTATE_LT_REMOTE_FAULT) ==
        "remote_fault");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_LINK_LOGICAL_MISMATCH,
                                    ETHTOOL_LINK_EXT_SUBSTATE_LLM_RS_FEC_IS_NOT_LOCKED) == "rs_fec_is_not_locked");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE, ETHTOOL_LINK_EXT_SUBSTATE_CI_CABLE_TEST_FAILURE) ==
        "cable_test_failure");
  CHECK(ethtool::ext_substate_label(ETHTOOL_LINK_EXT_STATE_MODULE, ETHTOOL_LINK_EXT_SUBSTATE_MODULE_CMIS_NOT_READY) ==
        "cmis_not_ready");
  CHECK(ethtool::fec_mode_label(ETHTOOL_LINK_MODE_FEC_RS_BIT) == "rs");
  CHECK(ethtool::fec_mode_label(ETHTOOL_LINK_MODE_FEC_LLRS_BIT) == "llrs");
  CHECK(ethtool::fec_mode_label(99) == "bit_99");
}

TEST_CASE("ethtool FEC reply: totals, lanes, histogram, exact u64", "[fixtures]") {
  for (bool pad : {false, true}) {
    auto r = ethtool::decode_fec_reply(fec_reply(pad, kHist));
    REQUIRE(r.ok());
    const auto& f = r.value;
    CHECK(f.active_mode_bit == static_cast<std::uint32_t>(ETHTOOL_LINK_MODE_FEC_RS_BIT));
    CHECK(f.automatic == false);
    CHECK(f.corrected_blocks.total == 1000u);
    CHECK(f.corrected_blocks.lanes == std::vector<std::uint64_t>{100, 200, 300, 400});
    CHECK(f.uncorrectable_blocks.total == UINT64_MAX);
    CHECK(f.uncorrectable_blocks.lanes.empty());
    CHECK_FALSE(f.corrected_bits.total);
    REQUIRE(f.histogram.size() == 3);
    CHECK(f.histogram[1].low == 1);
    CHECK(f.histogram[1].high == 3);
    CHECK(f.histogram[1].codewords == 77u);
    CHECK(f.histogram[1].lanes == std::vector<std::uint64_t>{10, 20, 30, 17});

    MetricSink out;
    collectors::netdev::emit_fec(kBase, f, out);
    CHECK(find(out, "rdma_netdev_fec_mode_info", with({{"mode", "rs"}})));
    CHECK(find(out, "rdma_netdev_fec_corrected_blocks_total", kBase)->u64() == 1000);
    CHECK(find(out, "rdma_netdev_fec_lane_corrected_blocks_total", with({{"lane", "3"}}))->u64() == 400);
    CHECK(find(out, "rdma_netdev_fec_uncorrectable_blocks_total", kBase)->u64() == UINT64_MAX);
    CHECK_FALSE(find(out, "rdma_netdev_fec_lane_uncorrectable_blocks_total"));
    CHECK_FALSE(find(out, "rdma_netdev_fec_corrected_bits_total"));
    CHECK(find(out, "rdma_netdev_fec_histogram_codewords_total", with({{"bit_errors", "0"}}))->u64() == 123456789);
    CHECK(find(out, "rdma_netdev_fec_histogram_codewords_total", with({{"bit_errors", "1-3"}}))->u64() == 77);
    CHECK(find(out, "rdma_netdev_fec_histogram_codewords_total", with({{"bit_errors", "4-15"}}))->u64() == 5);
  }
  // A kernel without statistics support in the driver (and 6.1: no histogram): mode only.
  auto bare = ethtool::decode_fec_reply(fec_reply(false, {}, std::nullopt));
  REQUIRE(bare.ok());
  CHECK_FALSE(bare.value.active_mode_bit);
  CHECK(bare.value.histogram.empty());
}

TEST_CASE("ethtool FEC and linkstate errors: EOPNOTSUPP, bad lengths, too many lanes", "[fixtures]") {
  CHECK(ethtool::decode_fec_reply(ndtest::error_message(EOPNOTSUPP)).error == ReadError::kNotSupported);
  CHECK(ethtool::decode_linkstate_reply(ndtest::error_message(EOPNOTSUPP)).error == ReadError::kNotSupported);
  CHECK(ethtool::decode_fec_reply({}).error == ReadError::kMalformed);
  // 10 values: more than total + ETHTOOL_MAX_LANES
  auto lanes = genl_reply(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, [](nlmsghdr* nlh) {
    nlattr* stats = mnl_attr_nest_start(nlh, ETHTOOL_A_FEC_STATS);
    put_u64_array(nlh, ETHTOOL_A_FEC_STAT_CORRECTED, std::vector<std::uint64_t>(10, 1), false, 0);
    mnl_attr_nest_end(nlh, stats);
  });
  CHECK(ethtool::decode_fec_reply(lanes).error == ReadError::kMalformed);
  // a 12-byte array
  auto odd = genl_reply(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, [](nlmsghdr* nlh) {
    nlattr* stats = mnl_attr_nest_start(nlh, ETHTOOL_A_FEC_STATS);
    std::uint8_t b[12]{};
    mnl_attr_put(nlh, ETHTOOL_A_FEC_STAT_UNCORR, sizeof b, b);
    mnl_attr_nest_end(nlh, stats);
  });
  CHECK(ethtool::decode_fec_reply(odd).error == ReadError::kMalformed);
  // a histogram bin without its range, and one with low > high
  auto no_range = genl_reply(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, [](nlmsghdr* nlh) {
    nlattr* stats = mnl_attr_nest_start(nlh, ETHTOOL_A_FEC_STATS);
    nlattr* bin = mnl_attr_nest_start(nlh, ethtool::kFecStatHist);
    mnl_attr_put_u64(nlh, ethtool::kFecHistBinValue, 1);
    mnl_attr_nest_end(nlh, bin);
    mnl_attr_nest_end(nlh, stats);
  });
  CHECK(ethtool::decode_fec_reply(no_range).error == ReadError::kMalformed);
  CHECK(ethtool::decode_fec_reply(fec_reply(false, {{5, 4, 1, false, {}}})).error == ReadError::kMalformed);
  // LINK as a u32: not the kernel's u8
  auto wide = genl_reply(ETHTOOL_MSG_LINKSTATE_GET_REPLY, ETHTOOL_A_LINKSTATE_HEADER,
                         [](nlmsghdr* nlh) { mnl_attr_put_u32(nlh, ETHTOOL_A_LINKSTATE_LINK, 1); });
  CHECK(ethtool::decode_linkstate_reply(wide).error == ReadError::kMalformed);
}

TEST_CASE("link health requests: header nest with the name, FEC asks for statistics", "[unit]") {
  auto has = [](const std::vector<std::uint8_t>& req, std::uint8_t cmd) {
    genlmsghdr g{};
    std::memcpy(&g, req.data() + sizeof(nlmsghdr), sizeof g);
    return reinterpret_cast<const nlmsghdr*>(req.data())->nlmsg_type == kFamily && g.cmd == cmd &&
           std::string(reinterpret_cast<const char*>(req.data()), req.size()).find("eth7") != std::string::npos;
  };
  CHECK(has(ethtool::build_fec_get(kFamily, "eth7"), ETHTOOL_MSG_FEC_GET));
  CHECK(has(ethtool::build_linkstate_get(kFamily, "eth7", true), ETHTOOL_MSG_LINKSTATE_GET));
  // With statistics the header carries ETHTOOL_A_HEADER_FLAGS (8 more bytes), without it not.
  CHECK(ethtool::build_linkstate_get(kFamily, "eth7", true).size() == ethtool::build_linkstate_get(kFamily, "eth7", false).size() + 8);
}

// A reply cut anywhere is an error, never a partial value. Random bytes and mutated replies are
// the fuzz_link_health target's (tests/fuzz).
TEST_CASE("link health decoders: a cut reply is malformed, not a partial value", "[fixtures]") {
  const auto fec = fec_reply(true, kHist);
  REQUIRE(ethtool::decode_fec_reply(fec).ok());
  for (std::size_t n = 0; n < fec.size(); ++n) {
    INFO("FEC reply cut to " << n << " of " << fec.size() << " bytes");
    CHECK_FALSE(ethtool::decode_fec_reply(std::span(fec).first(n)).ok());
  }
  const auto state = linkstate_reply({.link = 0, .state = 1, .substate = 2, .down_count = 3});
  REQUIRE(ethtool::decode_linkstate_reply(state).ok());
  for (std::size_t n = 0; n < state.size(); ++n) {
    INFO("link state reply cut to " << n << " of " << state.size() << " bytes");
    CHECK_FALSE(ethtool::decode_linkstate_reply(std::span(state).first(n)).ok());
  }
}

TEST_CASE("carrier counters from a fixture tree in the kernel's format", "[fixtures]") {
  ndtest::TempTree t;
  // net-sysfs.c: carrier_changes = up + down, each "%d\n"
  t.write("class/net/ens1f0np0/carrier_changes", "7\n");
  t.write("class/net/ens1f0np0/carrier_up_count", "4\n");
  t.write("class/net/ens1f0np0/carrier_down_count", "3\n");
  t.write("class/net/old0/carrier_changes", "2\n");  // a kernel before 4.16: no up/down counts
  t.write("class/net/bad0/carrier_changes", "x\n");
  std::vector<std::string> errors;
  auto on_error = [&](const std::string& path, ReadError) { errors.push_back(path); };
  auto c = collectors::netdev::read_carrier_counters(t.root(), "ens1f0np0", on_error);
  MetricSink out;
  collectors::netdev::emit_carrier(kBase, c, out);
  CHECK(find(out, "rdma_netdev_carrier_changes_total", kBase)->u64() == 7);
  CHECK(find(out, "rdma_netdev_carrier_up_total", kBase)->u64() == 4);
  CHECK(find(out, "rdma_netdev_carrier_down_total", kBase)->u64() == 3);
  auto old = collectors::netdev::read_carrier_counters(t.root(), "old0", on_error);
  CHECK(old.changes == 2u);
  CHECK_FALSE(old.up);
  CHECK(errors.empty());  // absent files are the kernel's version, not errors
  auto bad = collectors::netdev::read_carrier_counters(t.root(), "bad0", on_error);
  CHECK_FALSE(bad.changes);
  CHECK(errors == std::vector<std::string>{t.root() + "/class/net/bad0/carrier_changes"});
}

TEST_CASE("PHY statistics rows: mlx5 _phy group and bnxt_en port stats, lanes labelled", "[fixtures]") {
  const std::vector<std::string> mlx5{"rx_packets_phy", "rx_corrected_bits_phy", "rx_err_lane_0_phy", "rx_err_lane_3_phy",
                                      "rx_pcs_symbol_err_phy", "rx_symbol_err_phy"};
  const std::vector<std::uint64_t> v{1, UINT64_MAX, 11, 13, 5, 6};
  MetricSink out;
  collectors::netdev::emit_mapped(kBase, ethtool::map_stats("mlx5_core", mlx5), v, false, out);
  CHECK(find(out, "rdma_netdev_phy_corrected_bits_total", kBase)->u64() == UINT64_MAX);
  CHECK(find(out, "rdma_netdev_phy_lane_corrected_bits_total", with({{"lane", "3"}}))->u64() == 13);
  CHECK(find(out, "rdma_netdev_phy_symbol_errors_total", with({{"where", "pcs"}}))->u64() == 5);
  CHECK(find(out, "rdma_netdev_phy_symbol_errors_total", with({{"where", "carrier"}}))->u64() == 6);
  CHECK(out.sample_count() == 5);

  const std::vector<std::string> bnxt{"rx_bits", "rx_corrected_bits", "rx_pcs_symbol_err", "link_down_events"};
  const std::vector<std::uint64_t> bv{1000000, 20, 3, 9};
  MetricSink b;
  collectors::netdev::emit_mapped(kBase, ethtool::map_stats("bnxt_en", bnxt), bv, false, b);
  CHECK(find(b, "rdma_netdev_phy_received_bits_total", kBase)->u64() == 1000000);
  CHECK(find(b, "rdma_netdev_link_down_events_total", kBase)->u64() == 9);
  // ethtool netlink gave the down count: the driver's is not exported twice.
  MetricSink skip;
  collectors::netdev::emit_mapped(kBase, ethtool::map_stats("bnxt_en", bnxt), bv, false, skip, true);
  CHECK_FALSE(find(skip, "rdma_netdev_link_down_events_total"));
  CHECK(skip.sample_count() == 3);
}
