// dcbnl and ethtool-netlink decoding from constructed messages (the layout the kernel sends:
// whole structs in attributes), error replies, and robustness on cut and mutated bytes.
#include <catch2/catch.hpp>

#include <libmnl/libmnl.h>
#include <linux/dcbnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>

#include "collectors/netdev/netdev_metrics.h"
#include "sources/dcb/dcbnl.h"
#include "sources/ethtool/ethtool_netlink.h"
#include "sources/netlink/genetlink.h"
#include "tests/netdev/helpers.h"

using namespace rdma;
using namespace ndtest;  // find, with, kBase, Labels, MetricSink

namespace {

struct DcbSpec {
  bool pfc = true, ets = true, apps = true, dcbx = true;
  std::size_t pfc_len = sizeof(ieee_pfc);
};

// A DCB_CMD_IEEE_GET reply like dcbnl_ieee_fill(): RoCE on priority 3 (PFC + DSCP 26 + UDP 4791).
std::vector<std::uint8_t> ieee_reply(const DcbSpec& spec = {}) {
  dcbmsg dm{};
  dm.dcb_family = AF_UNSPEC;
  dm.cmd = DCB_CMD_IEEE_GET;
  return netlink::build_request(RTM_GETDCB, &dm, sizeof dm, [&](nlmsghdr* nlh) {
    mnl_attr_put_strz(nlh, DCB_ATTR_IFNAME, "ens1f0np0");
    nlattr* ieee = mnl_attr_nest_start(nlh, DCB_ATTR_IEEE);
    if (spec.ets) {
      ieee_ets e{};
      e.willing = 1;
      e.ets_cap = 8;
      for (int i = 0; i < 8; ++i) {
        e.prio_tc[i] = static_cast<std::uint8_t>(i == 3 ? 1 : 0);
        e.tc_tsa[i] = IEEE_8021QAZ_TSA_ETS;
      }
      e.tc_tx_bw[0] = 50;
      e.tc_tx_bw[1] = 50;
      e.tc_tsa[7] = IEEE_8021QAZ_TSA_STRICT;
      mnl_attr_put(nlh, DCB_ATTR_IEEE_ETS, sizeof e, &e);
    }
    if (spec.pfc) {
      ieee_pfc p{};
      p.pfc_cap = 8;
      p.pfc_en = 1u << 3;
      p.delay = 32;
      for (int i = 0; i < 8; ++i) {
        p.requests[i] = 100 + static_cast<std::uint64_t>(i);
        p.indications[i] = 200 + static_cast<std::uint64_t>(i);
      }
      p.requests[3] = UINT64_MAX;
      mnl_attr_put(nlh, DCB_ATTR_IEEE_PFC, spec.pfc_len, &p);
    }
    if (spec.apps) {
      nlattr* table = mnl_attr_nest_start(nlh, DCB_ATTR_IEEE_APP_TABLE);
      dcb_app dscp{IEEE_8021QAZ_APP_SEL_DSCP, 3, 26};
      dcb_app udp{IEEE_8021QAZ_APP_SEL_DGRAM, 3, 4791};
      mnl_attr_put(nlh, DCB_ATTR_IEEE_APP, sizeof dscp, &dscp);
      mnl_attr_put(nlh, DCB_ATTR_IEEE_APP, sizeof udp, &udp);
      mnl_attr_put(nlh, DCB_ATTR_IEEE_APP, sizeof udp, &udp);  // a duplicate entry: one series
      mnl_attr_nest_end(nlh, table);
    }
    mnl_attr_nest_end(nlh, ieee);
    if (spec.dcbx) mnl_attr_put_u8(nlh, DCB_ATTR_DCBX, DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE);
  });
}

std::vector<std::uint8_t> pause_reply(std::optional<std::uint64_t> tx, std::optional<std::uint64_t> rx) {
  genlmsghdr g{};
  g.cmd = ETHTOOL_MSG_PAUSE_GET_REPLY;
  g.version = ETHTOOL_GENL_VERSION;
  return netlink::build_request(27, &g, sizeof g, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, ETHTOOL_A_PAUSE_HEADER);
    mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_DEV_INDEX, 4);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, "ens1f0np0");
    mnl_attr_nest_end(nlh, hdr);
    mnl_attr_put_u8(nlh, ETHTOOL_A_PAUSE_AUTONEG, 0);
    mnl_attr_put_u8(nlh, ETHTOOL_A_PAUSE_RX, 1);
    mnl_attr_put_u8(nlh, ETHTOOL_A_PAUSE_TX, 1);
    if (tx || rx) {
      nlattr* st = mnl_attr_nest_start(nlh, ETHTOOL_A_PAUSE_STATS);
      if (tx) mnl_attr_put_u64(nlh, ETHTOOL_A_PAUSE_STAT_TX_FRAMES, *tx);
      if (rx) mnl_attr_put_u64(nlh, ETHTOOL_A_PAUSE_STAT_RX_FRAMES, *rx);
      mnl_attr_nest_end(nlh, st);
    }
  });
}

}  // namespace

TEST_CASE("dcbnl IEEE reply: PFC, ETS, APP table, DCBX", "[fixtures]") {
  auto r = dcb::decode_ieee_reply(ieee_reply());
  REQUIRE(r.ok());
  const auto& c = r.value;
  REQUIRE(c.pfc);
  CHECK(c.pfc->enabled_mask == 0x08);
  CHECK(c.pfc->enabled(3));
  CHECK_FALSE(c.pfc->enabled(4));
  CHECK(c.pfc->capability == 8);
  CHECK(c.pfc->delay == 32);
  CHECK(c.pfc->requests[3] == UINT64_MAX);
  CHECK(c.pfc->indications[7] == 207);
  REQUIRE(c.ets);
  CHECK(c.ets->priority_tc[3] == 1);
  CHECK(c.ets->tc_tx_bandwidth[1] == 50);
  CHECK(c.apps.size() == 3);
  CHECK(c.trust() == "dscp");
  CHECK(c.dcbx == (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE));

  MetricSink out;
  collectors::netdev::emit_dcb(kBase, c, out);
  CHECK(find(out, "rdma_netdev_dcb_pfc_enabled", with({{"priority", "3"}}))->number() == 1);
  CHECK(find(out, "rdma_netdev_dcb_pfc_enabled", with({{"priority", "0"}}))->number() == 0);
  auto tx3 = find(out, "rdma_netdev_dcb_pfc_frames_total", with({{"direction", "tx"}, {"priority", "3"}}));
  REQUIRE(tx3);
  CHECK(tx3->type == exporter::MetricType::kCounter);
  CHECK(tx3->u64() == UINT64_MAX);
  CHECK(find(out, "rdma_netdev_dcb_pfc_frames_total", with({{"direction", "rx"}, {"priority", "5"}}))->u64() == 205);
  CHECK(find(out, "rdma_netdev_dcb_ets_priority_tc", with({{"priority", "3"}}))->number() == 1);
  CHECK(find(out, "rdma_netdev_dcb_ets_tc_bandwidth_percent", with({{"tc", "0"}}))->number() == 50);
  CHECK(find(out, "rdma_netdev_dcb_ets_tc_algorithm_info", with({{"tc", "7"}, {"algorithm", "strict"}})));
  CHECK(find(out, "rdma_netdev_dcb_app_info", with({{"selector", "dscp"}, {"protocol", "26"}, {"priority", "3"}})));
  CHECK(find(out, "rdma_netdev_dcb_app_info", with({{"selector", "udp"}, {"protocol", "4791"}, {"priority", "3"}})));
  CHECK(ndtest::count(out, "rdma_netdev_dcb_app_info") == 2);
  CHECK(find(out, "rdma_netdev_dcb_trust_info", with({{"trust", "dscp"}})));
  CHECK(find(out, "rdma_netdev_dcb_dcbx_mode")->number() == 9);
}

TEST_CASE("dcbnl reply without APP table trusts PCP, partial replies decode", "[fixtures]") {
  auto r = dcb::decode_ieee_reply(ieee_reply({.ets = false, .apps = false, .dcbx = false}));
  REQUIRE(r.ok());
  CHECK(r.value.trust() == "pcp");
  CHECK_FALSE(r.value.ets);
  CHECK_FALSE(r.value.dcbx);
  CHECK(r.value.pfc);
}

TEST_CASE("dcbnl errors: EOPNOTSUPP, short struct, wrong command, garbage", "[fixtures]") {
  auto e = dcb::decode_ieee_reply(ndtest::error_message(EOPNOTSUPP));
  CHECK(e.error == ReadError::kNotSupported);
  CHECK(e.sys_errno == EOPNOTSUPP);
  CHECK(dcb::decode_ieee_reply(ieee_reply({.pfc_len = 8})).error == ReadError::kMalformed);
  dcbmsg dm{};
  dm.cmd = DCB_CMD_GSTATE;
  CHECK(dcb::decode_ieee_reply(netlink::build_request(RTM_GETDCB, &dm, sizeof dm)).error == ReadError::kMalformed);
  CHECK(dcb::decode_ieee_reply({}).error == ReadError::kMalformed);
  std::vector<std::uint8_t> junk(7, 0xff);
  CHECK(dcb::decode_ieee_reply(junk).error == ReadError::kMalformed);
}

TEST_CASE("ethtool netlink pause reply: standard statistics", "[fixtures]") {
  auto r = ethtool::decode_pause_reply(pause_reply(UINT64_MAX, 42));
  REQUIRE(r.ok());
  CHECK(r.value.tx_frames == UINT64_MAX);
  CHECK(r.value.rx_frames == 42);
  MetricSink out;
  CHECK(collectors::netdev::emit_link_pause(kBase, r.value, out));
  CHECK(find(out, "rdma_netdev_link_pause_frames_total", with({{"direction", "tx"}}))->u64() == UINT64_MAX);
  CHECK(find(out, "rdma_netdev_link_pause_frames_total", with({{"direction", "rx"}}))->u64() == 42);

  // A driver with pause settings but no statistics: no nest, nothing exported.
  auto none = ethtool::decode_pause_reply(pause_reply(std::nullopt, std::nullopt));
  REQUIRE(none.ok());
  MetricSink empty;
  CHECK_FALSE(collectors::netdev::emit_link_pause(kBase, none.value, empty));
  CHECK(empty.sample_count() == 0);
  CHECK(ethtool::decode_pause_reply(ndtest::error_message(EOPNOTSUPP)).error == ReadError::kNotSupported);
}

TEST_CASE("generic netlink family id", "[fixtures]") {
  genlmsghdr g{};
  g.cmd = CTRL_CMD_NEWFAMILY;
  auto id = netlink::decode_family_id(netlink::build_request(GENL_ID_CTRL, &g, sizeof g, [](nlmsghdr* nlh) {
    mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, "ethtool");
    mnl_attr_put_u16(nlh, CTRL_ATTR_FAMILY_ID, 27);
  }));
  REQUIRE(id.ok());
  CHECK(id.value == 27);
  CHECK(netlink::decode_family_id(ndtest::error_message(ENOENT)).error == ReadError::kMalformed);
}

TEST_CASE("request builders carry the interface name", "[unit]") {
  auto req = dcb::build_ieee_get("eth7");
  auto* nlh = reinterpret_cast<const nlmsghdr*>(req.data());
  CHECK(nlh->nlmsg_type == RTM_GETDCB);
  CHECK(nlh->nlmsg_len == req.size());
  CHECK(std::string(reinterpret_cast<const char*>(req.data()), req.size()).find("eth7") != std::string::npos);
  auto pause = ethtool::build_pause_get(27, "eth7");
  CHECK(reinterpret_cast<const nlmsghdr*>(pause.data())->nlmsg_type == 27);
}

// A reply cut anywhere (the kernel's length says more than arrived) is an error, never a partial
// value. Random bytes and mutated replies are the fuzz_netdev_netlink target's (tests/fuzz).
TEST_CASE("decoders: a cut reply is malformed, not a partial value", "[fixtures]") {
  const auto ieee = ieee_reply();
  REQUIRE(dcb::decode_ieee_reply(ieee).ok());
  for (std::size_t n = 0; n < ieee.size(); ++n) {
    INFO("ieee reply cut to " << n << " of " << ieee.size() << " bytes");
    CHECK_FALSE(dcb::decode_ieee_reply(std::span(ieee).first(n)).ok());
  }
  const auto pause = pause_reply(1, 2);
  REQUIRE(ethtool::decode_pause_reply(pause).ok());
  for (std::size_t n = 0; n < pause.size(); ++n) {
    INFO("pause reply cut to " << n << " of " << pause.size() << " bytes");
    CHECK_FALSE(ethtool::decode_pause_reply(std::span(pause).first(n)).ok());
  }
}
