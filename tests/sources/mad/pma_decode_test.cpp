// PMA decoders against libibmad's own field tables: values encoded with mad_encode_field() must
// decode to the same numbers; short buffers decode to nullopt (random bytes: the fuzz_mad target).
#include <infiniband/mad.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>
#include <random>

#include "sources/mad/pma_counters.h"
#include "sources/mad/pma_decode.h"

using namespace rdma::mad;

namespace {
std::mt19937_64 rng(12345);
std::uint64_t rnd(unsigned width) { return width >= 64 ? rng() : rng() & ((std::uint64_t{1} << width) - 1); }
void put32(std::uint8_t* buf, enum MAD_FIELDS f, std::uint32_t v) { mad_encode_field(buf, f, &v); }
void put64(std::uint8_t* buf, enum MAD_FIELDS f, std::uint64_t v) { mad_encode_field(buf, f, &v); }
}  // namespace

namespace {

// libibmad's field of each PortCounters row of the counter table. Not IB_PC_QP1_DROP_F: libibmad
// 44 places it on VL15Dropped's bits (176); IBA puts QP1Dropped at bits 160-175, where the
// decoder reads it (checked below).
using Id = PmaCounterId;
const std::map<PmaCounterId, enum MAD_FIELDS> kPcFields = {
    {Id::kSymbolErrorCounter, IB_PC_ERR_SYM_F}, {Id::kLinkErrorRecoveryCounter, IB_PC_LINK_RECOVERS_F},
    {Id::kLinkDownedCounter, IB_PC_LINK_DOWNED_F}, {Id::kPortRcvErrors, IB_PC_ERR_RCV_F},
    {Id::kPortRcvRemotePhysicalErrors, IB_PC_ERR_PHYSRCV_F}, {Id::kPortRcvSwitchRelayErrors, IB_PC_ERR_SWITCH_REL_F},
    {Id::kPortXmitDiscards, IB_PC_XMT_DISCARDS_F}, {Id::kPortXmitConstraintErrors, IB_PC_ERR_XMTCONSTR_F},
    {Id::kPortRcvConstraintErrors, IB_PC_ERR_RCVCONSTR_F}, {Id::kLocalLinkIntegrityErrors, IB_PC_ERR_LOCALINTEG_F},
    {Id::kExcessiveBufferOverrunErrors, IB_PC_ERR_EXCESS_OVR_F}, {Id::kVL15Dropped, IB_PC_VL15_DROPPED_F},
    {Id::kPortXmitData, IB_PC_XMT_BYTES_F}, {Id::kPortRcvData, IB_PC_RCV_BYTES_F}, {Id::kPortXmitPkts, IB_PC_XMT_PKTS_F},
    {Id::kPortRcvPkts, IB_PC_RCV_PKTS_F}, {Id::kPortXmitWait, IB_PC_XMT_WAIT_F}};

// The row's id as a number, for INFO().
int id_of(const PmaCounter& c) { return static_cast<int>(c.id); }

// The width libibmad gives a field: all ones encoded, read back.
unsigned libibmad_width(enum MAD_FIELDS f) {
  std::uint8_t buf[kPmaDataSize] = {};
  std::uint32_t ones = UINT32_MAX, back = 0;
  mad_encode_field(buf, f, &ones);
  mad_decode_field(buf, f, &back);
  unsigned w = 0;
  for (; back; back >>= 1) ++w;
  return w;
}

}  // namespace

TEST_CASE("PortCounters decode matches libibmad field layout, with the counter table's widths", "[pma]") {
  unsigned rows = 0;
  for (const PmaCounter& c : pma_counters()) {
    if (c.attr != PmaAttr::kPortCounters || c.id == Id::kQP1Dropped) continue;
    ++rows;
    INFO(id_of(c));
    REQUIRE(kPcFields.count(c.id));
    CHECK(libibmad_width(kPcFields.at(c.id)) == c.width);
  }
  CHECK(rows == kPcFields.size());
  for (int round = 0; round < 50; ++round) {
    std::uint8_t buf[kPmaDataSize] = {};
    std::map<PmaCounterId, std::uint32_t> want;
    for (const PmaCounter& c : pma_counters()) {
      if (!kPcFields.count(c.id)) continue;
      want[c.id] = static_cast<std::uint32_t>(round == 0 ? (std::uint64_t{1} << c.width) - 1 : rnd(c.width));
      put32(buf, kPcFields.at(c.id), want[c.id]);
    }
    put32(buf, IB_PC_PORT_SELECT_F, 7);
    PortReadings r;
    r.cap_mask = kCapXmitWait;  // PortXmitWait valid; no PortCountersExtended
    r.pc = decode_port_counters(buf);
    REQUIRE(r.pc);
    CHECK(r.pc->port_select == 7);
    for (const PmaCounter& c : pma_counters()) {
      if (!kPcFields.count(c.id)) continue;
      INFO(id_of(c));
      const auto v = pma_value(c, r);
      REQUIRE(v);
      CHECK(v->raw == want[c.id]);
      CHECK(v->width == c.width);
      CHECK(saturated(*v) == (want[c.id] == (std::uint64_t{1} << c.width) - 1));
    }
    buf[20] = 0x12;
    buf[21] = 0x34;
    CHECK(decode_port_counters(buf)->qp1_dropped == 0x1234);
  }
}

TEST_CASE("PortCountersExtended decode is u64 exact", "[pma]") {
  std::uint8_t buf[kPmaDataSize] = {};
  const enum MAD_FIELDS f[] = {IB_PC_EXT_XMT_BYTES_F, IB_PC_EXT_RCV_BYTES_F, IB_PC_EXT_XMT_PKTS_F, IB_PC_EXT_RCV_PKTS_F,
                               IB_PC_EXT_XMT_UPKTS_F, IB_PC_EXT_RCV_UPKTS_F, IB_PC_EXT_XMT_MPKTS_F, IB_PC_EXT_RCV_MPKTS_F};
  const std::uint64_t v[] = {UINT64_MAX, 1, 0x8000000000000001ull, 1000000000000ull, 2, 3, 4, UINT64_MAX - 1};
  for (int i = 0; i < 8; ++i) put64(buf, f[i], v[i]);
  auto c = decode_port_counters_ext(buf);
  REQUIRE(c);
  CHECK(c->xmit_data == v[0]);
  CHECK(c->rcv_data == v[1]);
  CHECK(c->xmit_pkts == v[2]);
  CHECK(c->rcv_pkts == v[3]);
  CHECK(c->unicast_xmit_pkts == v[4]);
  CHECK(c->unicast_rcv_pkts == v[5]);
  CHECK(c->multicast_xmit_pkts == v[6]);
  CHECK(c->multicast_rcv_pkts == v[7]);
  // The table's 64-bit sources, in libibmad's order above.
  const PmaCounterId rows[] = {Id::kPortXmitData, Id::kPortRcvData, Id::kPortXmitPkts, Id::kPortRcvPkts,
                               Id::kPortUnicastXmitPkts, Id::kPortUnicastRcvPkts, Id::kPortMulticastXmitPkts,
                               Id::kPortMulticastRcvPkts};
  PortReadings r;
  r.cap_mask = kCapExtWidth;
  r.ext = c;
  for (int i = 0; i < 8; ++i) {
    const auto row = std::find_if(pma_counters().begin(), pma_counters().end(),
                                  [&](const PmaCounter& x) { return x.id == rows[i]; });
    REQUIRE(row != pma_counters().end());
    const auto got = pma_value(*row, r);
    REQUIRE(got);
    CHECK(got->raw == v[i]);
    CHECK(got->width == 64);
  }
}

TEST_CASE("error details, VL xmit wait and ClassPortInfo match libibmad", "[pma]") {
  std::uint8_t buf[kPmaDataSize] = {};
  const enum MAD_FIELDS re[] = {IB_PC_RCV_LOCAL_PHY_ERR_F, IB_PC_RCV_MALFORMED_PKT_ERR_F, IB_PC_RCV_BUF_OVR_ERR_F,
                                IB_PC_RCV_DLID_MAP_ERR_F, IB_PC_RCV_VL_MAP_ERR_F, IB_PC_RCV_LOOPING_ERR_F};
  for (int i = 0; i < 6; ++i) put32(buf, re[i], 1000 + i);
  auto r = decode_rcv_error_details(buf);
  REQUIRE(r);
  CHECK(r->local_physical_errors == 1000);
  CHECK(r->malformed_packet_errors == 1001);
  CHECK(r->buffer_overrun_errors == 1002);
  CHECK(r->dlid_mapping_errors == 1003);
  CHECK(r->vl_mapping_errors == 1004);
  CHECK(r->looping_errors == 1005);

  std::memset(buf, 0, sizeof buf);
  const enum MAD_FIELDS xd[] = {IB_PC_XMT_INACT_DISC_F, IB_PC_XMT_NEIGH_MTU_DISC_F, IB_PC_XMT_SW_LIFE_DISC_F,
                                IB_PC_XMT_SW_HOL_DISC_F};
  for (int i = 0; i < 4; ++i) put32(buf, xd[i], 65535 - i);
  auto x = decode_xmit_discard_details(buf);
  REQUIRE(x);
  CHECK(x->inactive_discards == 65535);
  CHECK(x->neighbor_mtu_discards == 65534);
  CHECK(x->sw_lifetime_limit_discards == 65533);
  CHECK(x->sw_hoq_lifetime_limit_discards == 65532);

  std::memset(buf, 0, sizeof buf);
  for (int vl = 0; vl < 16; ++vl) put32(buf, static_cast<MAD_FIELDS>(IB_PC_PORT_VL_XMIT_WAIT0_F + vl), 100 * vl + 1);
  auto w = decode_vl_xmit_wait(buf);
  REQUIRE(w);
  for (int vl = 0; vl < 16; ++vl) CHECK(w->vl[vl] == 100u * vl + 1);

  std::memset(buf, 0, sizeof buf);
  put32(buf, IB_CPI_CAPMASK_F, 0x1300);
  put32(buf, IB_CPI_CAPMASK2_F, 0x5a5a5a5);
  auto cpi = decode_class_port_info(buf);
  REQUIRE(cpi);
  CHECK(cpi->capability_mask == 0x1300);
  CHECK(cpi->capability_mask2 == 0x5a5a5a5);
}

TEST_CASE("request building and header parsing", "[pma]") {
  auto m = build_pma_get(0x1122334455667788ull, PmaAttr::kPortCountersExtended, 9);
  auto h = parse_header(m);
  REQUIRE(h);
  CHECK(h->base_version == 1);
  CHECK(h->mgmt_class == 0x04);
  CHECK(h->method == 0x01);
  CHECK(h->tid == 0x1122334455667788ull);
  CHECK(h->attr_id == 0x1D);
  CHECK(mad_get_field(m.data(), 0, IB_MAD_ATTRID_F) == 0x1D);
  CHECK(mad_get_field(m.data() + kPmaDataOffset, 0, IB_PC_PORT_SELECT_F) == 9);
  CHECK(!parse_header(std::span(m).first(23)));
  CHECK(status_unsupported(0x0C));
  CHECK(status_unsupported(0x08));
  CHECK(!status_unsupported(0x1C));
  CHECK(status_text(0x0C) == "unsupported attribute (0x000c)");
}

TEST_CASE("short buffers: each decoder needs its attribute's full length, bit fields stay inside", "[pma][fuzz]") {
  std::vector<std::uint8_t> b;
  for (std::size_t n = 0; n < 80; ++n) {
    b.assign(n, 0xff);
    const auto s = std::span<const std::uint8_t>(b);
    CHECK(decode_port_counters(s).has_value() == (n >= 44));
    CHECK(decode_port_counters_ext(s).has_value() == (n >= 72));
    CHECK(decode_rcv_error_details(s).has_value() == (n >= 16));
    CHECK(decode_xmit_discard_details(s).has_value() == (n >= 12));
    CHECK(decode_vl_xmit_wait(s).has_value() == (n >= 36));
    CHECK(decode_class_port_info(s).has_value() == (n >= 8));
    (void)parse_header(s);
  }
  CHECK(!get_field(b, 0, 0));
  CHECK(!get_field(b, 0, 65));
  CHECK(!get_field(b, b.size() * 8 - 3, 4));
  CHECK(*get_field(b, b.size() * 8 - 4, 4) == 0xf);
}

TEST_CASE("node-name-map parsing", "[pma]") {
  auto m = parse_node_name_map(
      "# comment\n0x0008f10400411f3e \"ib-core-1\"\n\n  0x100002   \"compute 02\"  # trailing\n"
      "100004 plain-name\nnot-a-guid \"x\"\n0x100006 \"unterminated\n0x100002 \"compute-02b\"\n");
  CHECK(m.bad_lines == std::vector<int>{6, 7});
  REQUIRE(m.find(0x0008f10400411f3eull));
  CHECK(*m.find(0x0008f10400411f3eull) == "ib-core-1");
  CHECK(*m.find(0x100002) == "compute-02b");
  CHECK(*m.find(0x100004) == "plain-name");
  CHECK(m.find(0x999) == nullptr);
  CHECK(guid_label(0x100002) == "0x0000000000100002");
}
