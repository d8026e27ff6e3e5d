// PortInfo, SMInfo and PortExtendedSpeedsCounters decoders against libibmad's own field tables
// (values encoded with mad_encode_field() decode to the same numbers), link training on PortInfos
// built the same way, and short buffers refused.
#include <infiniband/mad.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "sources/mad/smp_decode.h"

using namespace rdma::mad;

namespace {
std::mt19937_64 rng(2525);
std::uint32_t rnd(unsigned width) { return static_cast<std::uint32_t>(width >= 32 ? rng() : rng() & ((1ull << width) - 1)); }
void put32(std::uint8_t* buf, enum MAD_FIELDS f, std::uint32_t v) { mad_encode_field(buf, f, &v); }
void put64(std::uint8_t* buf, enum MAD_FIELDS f, std::uint64_t v) { mad_encode_field(buf, f, &v); }

// A PortInfo as an SMA of an active link would answer, encoded by libibmad.
std::vector<std::uint8_t> port_info(std::uint8_t w_en, std::uint8_t w_sup, std::uint8_t w_act, std::uint8_t ext_en,
                                    std::uint8_t ext_sup, std::uint8_t ext_act) {
  std::vector<std::uint8_t> b(kSmpDataSize, 0);
  put32(b.data(), IB_PORT_CAPMASK_F, 1u << 14);  // IsExtendedSpeedsSupported
  put32(b.data(), IB_PORT_LINK_WIDTH_ENABLED_F, w_en);
  put32(b.data(), IB_PORT_LINK_WIDTH_SUPPORTED_F, w_sup);
  put32(b.data(), IB_PORT_LINK_WIDTH_ACTIVE_F, w_act);
  put32(b.data(), IB_PORT_LINK_SPEED_SUPPORTED_F, 7);
  put32(b.data(), IB_PORT_LINK_SPEED_ENABLED_F, 7);
  put32(b.data(), IB_PORT_LINK_SPEED_ACTIVE_F, 4);
  put32(b.data(), IB_PORT_LINK_SPEED_EXT_ENABLED_F, ext_en);
  put32(b.data(), IB_PORT_LINK_SPEED_EXT_SUPPORTED_F, ext_sup);
  put32(b.data(), IB_PORT_LINK_SPEED_EXT_ACTIVE_F, ext_act);
  put32(b.data(), IB_PORT_STATE_F, 4);
  put32(b.data(), IB_PORT_PHYS_STATE_F, 5);
  return b;
}
PortInfo pi(const std::vector<std::uint8_t>& b) { return *decode_port_info(b); }

// IBA 1.7's LinkSpeedExt2* fields, which Debian's libibmad cannot encode: written bit by bit at the
// IBA bit offsets (most significant bit of byte 0 is bit 0), as newer rdma-core's fields.c places them
// (LinkSpeedExtActive2 449/2, LinkSpeedExtSupported2 451/2, LinkSpeedExtEnabled2 453/3).
void put_bits(std::vector<std::uint8_t>& b, std::size_t offset, unsigned width, std::uint32_t v) {
  for (unsigned i = 0; i < width; ++i) {
    const std::size_t bit = offset + i;
    const auto mask = static_cast<std::uint8_t>(0x80u >> (bit % 8));
    if ((v >> (width - 1 - i)) & 1u)
      b[bit / 8] |= mask;
    else
      b[bit / 8] &= static_cast<std::uint8_t>(~mask);
  }
}
void put_xdr(std::vector<std::uint8_t>& b, std::uint32_t active2, std::uint32_t supported2, std::uint32_t enabled2) {
  put_bits(b, 449, 2, active2);
  put_bits(b, 451, 2, supported2);
  put_bits(b, 453, 3, enabled2);
}
}  // namespace

TEST_CASE("PortInfo fields decode where libibmad encodes them", "[pma]") {
  for (int round = 0; round < 200; ++round) {
    std::vector<std::uint8_t> b(kSmpDataSize, 0);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());  // neighbours of every field are noise
    const std::uint32_t lid = rnd(16), sm = rnd(16), cap = rnd(32), lp = rnd(8), we = rnd(8), ws = rnd(8), wa = rnd(8),
                        ss = rnd(4), st = rnd(4), ps = rnd(4), ldd = rnd(4), sa = rnd(4), se = rnd(4), cap2 = rnd(16),
                        xa = rnd(4), xs = rnd(4), xe = rnd(5);
    put32(b.data(), IB_PORT_LID_F, lid);
    put32(b.data(), IB_PORT_SMLID_F, sm);
    put32(b.data(), IB_PORT_CAPMASK_F, cap);
    put32(b.data(), IB_PORT_LOCAL_PORT_F, lp);
    put32(b.data(), IB_PORT_LINK_WIDTH_ENABLED_F, we);
    put32(b.data(), IB_PORT_LINK_WIDTH_SUPPORTED_F, ws);
    put32(b.data(), IB_PORT_LINK_WIDTH_ACTIVE_F, wa);
    put32(b.data(), IB_PORT_LINK_SPEED_SUPPORTED_F, ss);
    put32(b.data(), IB_PORT_STATE_F, st);
    put32(b.data(), IB_PORT_PHYS_STATE_F, ps);
    put32(b.data(), IB_PORT_LINK_DOWN_DEF_F, ldd);
    put32(b.data(), IB_PORT_LINK_SPEED_ACTIVE_F, sa);
    put32(b.data(), IB_PORT_LINK_SPEED_ENABLED_F, se);
    put32(b.data(), IB_PORT_CAPMASK2_F, cap2);
    put32(b.data(), IB_PORT_LINK_SPEED_EXT_ACTIVE_F, xa);
    put32(b.data(), IB_PORT_LINK_SPEED_EXT_SUPPORTED_F, xs);
    put32(b.data(), IB_PORT_LINK_SPEED_EXT_ENABLED_F, xe);
    const auto p = decode_port_info(b);
    REQUIRE(p);
    CHECK(p->lid == lid);
    CHECK(p->master_sm_lid == sm);
    CHECK(p->capability_mask == cap);
    CHECK(p->local_port == lp);
    CHECK(p->width_enabled == we);
    CHECK(p->width_supported == ws);
    CHECK(p->width_active == wa);
    CHECK(p->speed_supported == ss);
    CHECK(p->port_state == st);
    CHECK(p->phys_state == ps);
    CHECK(p->link_down_default == ldd);
    CHECK(p->speed_active == sa);
    CHECK(p->speed_enabled == se);
    CHECK(p->capability_mask2 == cap2);
    CHECK(p->speed_ext_active == xa);
    CHECK(p->speed_ext_supported == xs);
    CHECK(p->speed_ext_enabled == xe);
  }
  CHECK_FALSE(decode_port_info(std::vector<std::uint8_t>(kSmpDataSize - 1, 0)));
}

TEST_CASE("a link is degraded exactly when it trains below what both ends support and one enables", "[pma]") {
  // 4x NDR both ends (1x|2x|4x supported, ext FDR..NDR): healthy.
  const auto ndr = port_info(0x13, 0x13, 2, 15, 15, 8);
  auto t = link_training(pi(ndr), pi(ndr));
  CHECK_FALSE(t.degraded());
  CHECK(t.active_width.name == "4x");
  CHECK(t.active_speed.name == "NDR");
  CHECK(t.possible_speed.name == "NDR");
  // The same link trained at 1x: degraded, possible 4x.
  const auto one_x = port_info(0x13, 0x13, 1, 15, 15, 8);
  t = link_training(pi(one_x), pi(ndr));
  CHECK(t.degraded());
  CHECK(t.active_width.name == "1x");
  CHECK(t.possible_width.name == "4x");
  // Trained at HDR where both ends run NDR: degraded on speed.
  const auto hdr_on_ndr = port_info(0x13, 0x13, 2, 15, 15, 4);
  t = link_training(pi(hdr_on_ndr), pi(ndr));
  CHECK(t.degraded());
  CHECK(t.active_speed.name == "HDR");
  CHECK(t.possible_speed.name == "NDR");
  // An NDR switch port to an HDR HCA: HDR is the best they share, not degraded.
  const auto hdr_hca = port_info(0x13, 0x13, 2, 7, 7, 4);
  t = link_training(pi(hdr_on_ndr), pi(hdr_hca));
  CHECK_FALSE(t.degraded());
  CHECK(t.possible_speed.name == "HDR");
  // Enabled 31 = "as supported"; 30 = extended speeds disabled on that end.
  const auto as_supported = port_info(0x13, 0x13, 2, 31, 15, 8);
  CHECK_FALSE(link_training(pi(as_supported), pi(ndr)).degraded());
  const auto ext_off = port_info(0x13, 0x13, 2, 30, 15, 0);
  CHECK(link_training(pi(ext_off), pi(ext_off)).possible_speed.name == "QDR");
  // Both ends configured to 1x on purpose: not a fault.
  const auto cfg_1x = port_info(0x01, 0x13, 1, 15, 15, 8);
  CHECK_FALSE(link_training(pi(cfg_1x), pi(cfg_1x)).degraded());
  // Without IsExtendedSpeedsSupported the ext fields are ignored: QDR.
  auto qdr = port_info(0x02, 0x02, 2, 15, 15, 8);
  put32(qdr.data(), IB_PORT_CAPMASK_F, 0);
  t = link_training(pi(qdr), pi(qdr));
  CHECK(t.active_speed.name == "QDR");
  CHECK_FALSE(t.degraded());
  // A port without an active width (link down) never reads as degraded on its own speed field.
  CHECK(widest(0).name.empty());
}

TEST_CASE("XDR: LinkSpeedExt2 fields decode from their IBA 1.7 bits, between libibmad's neighbours", "[pma]") {
  for (int round = 0; round < 200; ++round) {
    std::vector<std::uint8_t> b(kSmpDataSize, 0);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    const std::uint32_t a2 = rnd(2), s2 = rnd(2), e2 = rnd(3), hint = rnd(16), trip = rnd(24);
    put_xdr(b, a2, s2, e2);
    // The fields around them, as libibmad encodes them, are untouched by the XDR bits and vice versa.
    put32(b.data(), IB_PORT_MAX_CREDIT_HINT_F, hint);
    put32(b.data(), IB_PORT_LINK_ROUND_TRIP_F, trip);
    const auto p = decode_port_info(b);
    REQUIRE(p);
    CHECK(p->speed_ext2_active == a2);
    CHECK(p->speed_ext2_supported == s2);
    CHECK(p->speed_ext2_enabled == e2);
    std::uint32_t got = 0;
    mad_decode_field(b.data(), IB_PORT_MAX_CREDIT_HINT_F, &got);
    CHECK(got == hint);
    mad_decode_field(b.data(), IB_PORT_LINK_ROUND_TRIP_F, &got);
    CHECK(got == trip);
  }
  // 4x XDR both ends: active XDR (212.5 Gb/s per lane), not degraded.
  auto xdr_port = port_info(0x13, 0x13, 2, 15, 15, 8);
  put_xdr(xdr_port, 1, 1, 1);
  auto t = link_training(pi(xdr_port), pi(xdr_port));
  CHECK(t.active_speed.name == "XDR");
  CHECK(t.active_speed.gbps_per_lane == 212.5);
  CHECK(t.possible_speed.name == "XDR");
  CHECK_FALSE(t.degraded());
  // The same link trained at NDR (Active2 0) where both ends support and enable XDR: degraded.
  auto ndr_on_xdr = port_info(0x13, 0x13, 2, 15, 15, 8);
  put_xdr(ndr_on_xdr, 0, 1, 1);
  t = link_training(pi(ndr_on_xdr), pi(xdr_port));
  CHECK(t.active_speed.name == "NDR");
  CHECK(t.possible_speed.name == "XDR");
  CHECK(t.degraded());
  // An XDR switch port to an NDR-only HCA (Supported2 0): NDR is the best they share.
  const auto ndr_hca = port_info(0x13, 0x13, 2, 15, 15, 8);
  t = link_training(pi(ndr_on_xdr), pi(ndr_hca));
  CHECK(t.possible_speed.name == "NDR");
  CHECK_FALSE(t.degraded());
  // Both ends support XDR, neither enables it: configured lower on purpose, not a fault.
  auto xdr_off = port_info(0x13, 0x13, 2, 15, 15, 8);
  put_xdr(xdr_off, 0, 1, 0);
  CHECK_FALSE(link_training(pi(xdr_off), pi(xdr_off)).degraded());
}

TEST_CASE("SMInfo decodes where libibmad encodes it", "[pma]") {
  std::vector<std::uint8_t> b(kSmpDataSize, 0);
  put64(b.data(), IB_SMINFO_GUID_F, 0x0002c90300a1b2c3ull);
  put64(b.data(), IB_SMINFO_KEY_F, 0x1122334455667788ull);
  put32(b.data(), IB_SMINFO_ACT_F, 0xdeadbeef);
  put32(b.data(), IB_SMINFO_PRIO_F, 14);
  put32(b.data(), IB_SMINFO_STATE_F, 3);
  const auto s = decode_sm_info(b);
  REQUIRE(s);
  CHECK(s->guid == 0x0002c90300a1b2c3ull);
  CHECK(s->sm_key == 0x1122334455667788ull);
  CHECK(s->act_count == 0xdeadbeef);
  CHECK(s->priority == 14);
  CHECK(s->state == 3);
  CHECK(sm_state_name(s->state) == "master");
  CHECK(sm_state_name(2) == "standby");
  CHECK_FALSE(decode_sm_info(std::vector<std::uint8_t>(20, 0)));
}

TEST_CASE("PortExtendedSpeedsCounters decode in both forms where libibmad encodes them", "[pma]") {
  std::vector<std::uint8_t> b(192, 0);
  put32(b.data(), IB_PESC_PORT_SELECT_F, 7);
  put32(b.data(), IB_PESC_SYNC_HDR_ERR_CTR_F, 0x1234);
  put32(b.data(), IB_PESC_UNK_BLOCK_CTR_F, 0x4321);
  for (int i = 0; i < 12; ++i) {
    put32(b.data(), static_cast<MAD_FIELDS>(IB_PESC_ERR_DET_CTR_LANE0_F + i), 100 + i);
    put32(b.data(), static_cast<MAD_FIELDS>(IB_PESC_FEC_CORR_BLOCK_CTR_LANE0_F + i), 0x10000000u + i);
    put32(b.data(), static_cast<MAD_FIELDS>(IB_PESC_FEC_UNCORR_BLOCK_CTR_LANE0_F + i), 0x20000000u + i);
  }
  auto c = decode_ext_speeds_counters(b, false);
  REQUIRE(c);
  CHECK(c->port_select == 7);
  CHECK(c->sync_header_errors == 0x1234);
  CHECK(c->unknown_blocks == 0x4321);
  for (std::size_t i = 0; i < 12; ++i) {
    CHECK(c->error_detection_per_lane[i] == 100 + i);
    CHECK(c->fec_correctable_per_lane[i] == 0x10000000u + i);
    CHECK(c->fec_uncorrectable_per_lane[i] == 0x20000000u + i);
  }
  std::vector<std::uint8_t> r(192, 0);
  put32(r.data(), IB_PESC_RSFEC_PORT_SELECT_F, 3);
  for (int i = 0; i < 12; ++i)
    put32(r.data(), static_cast<MAD_FIELDS>(IB_PESC_RSFEC_FEC_CORR_SYMBOL_CTR_LANE0_F + i), 0xabc00000u + i);
  put32(r.data(), IB_PESC_PORT_FEC_CORR_BLOCK_CTR_F, 0xfffffff0u);
  put32(r.data(), IB_PESC_PORT_FEC_UNCORR_BLOCK_CTR_F, 5);
  put32(r.data(), IB_PESC_PORT_FEC_CORR_SYMBOL_CTR_F, 0x01020304u);
  c = decode_ext_speeds_counters(r, true);
  REQUIRE(c);
  CHECK(c->rs_fec);
  CHECK(c->port_select == 3);
  for (std::size_t i = 0; i < 12; ++i) CHECK(c->corrected_symbols_per_lane[i] == 0xabc00000u + i);
  CHECK(c->correctable_blocks == 0xfffffff0u);
  CHECK(c->uncorrectable_blocks == 5);
  CHECK(c->corrected_symbols == 0x01020304u);
  CHECK_FALSE(decode_ext_speeds_counters(std::vector<std::uint8_t>(151, 0), true));
}

// Each decoder refuses a buffer shorter than its attribute and decodes any content of full length
// (every field of these attributes is defined for every bit pattern). Any bytes, link training
// between two decoded PortInfos included, are the fuzz_smp target's.
TEST_CASE("SMP decoders: short buffers are refused, any full-length content decodes", "[pma]") {
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::uint8_t> b(rng() % 200);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    INFO("round " << round << ", " << b.size() << " bytes");
    const auto p = decode_port_info(b);
    CHECK(p.has_value() == (b.size() >= kSmpDataSize));
    if (p) CHECK_FALSE(phys_state_name(p->phys_state).empty());
    CHECK(decode_sm_info(b).has_value() == (b.size() >= 21));
    CHECK(decode_ext_speeds_counters(b, round & 1).has_value() == (b.size() >= 152));
  }
}
