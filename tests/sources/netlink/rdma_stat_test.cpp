// The RDMA netlink codec on constructed messages: kernel-shaped replies decode exactly (u64 end
// to end), requests encode to the exact bytes, and any truncation or corruption is reported,
// never read past.
#include <linux/netlink.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "sources/netlink/rdma_stat.h"

using namespace rdma::netlink;

namespace {

std::vector<std::uint8_t> stat_reply(std::uint32_t seq, std::uint32_t dev, const std::string& name, std::uint32_t port,
                                     const std::vector<HwCounter>& counters) {
  MessageBuilder b(nldev_type(kCmdStatGet), 0, seq, 1234);
  b.u32(kAttrDevIndex, dev).str(kAttrDevName, name).u32(kAttrPortIndex, port).begin_nest(kAttrStatHwCounters);
  for (const auto& c : counters)
    b.begin_nest(kAttrStatHwCounterEntry).str(kAttrStatHwCounterEntryName, c.name).u64(kAttrStatHwCounterEntryValue, c.value).end_nest();
  b.end_nest();
  return b.finish();
}

std::vector<std::uint8_t> cat(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::vector<HwCounter> kCounters{
    {"sent_pkts", 139562},
    {"rcvd_pkts", 13568},
    {"cc_rx_ce_pkts", 9223372036854775808ull},   // 2^63
    {"SwLinkUp,32", 18446744073709551615ull},    // 2^64-1
    {"Rcvd Out of order packets", 0},
};

}  // namespace

TEST_CASE("a STAT_GET reply with its ACK decodes exactly") {
  auto buf = cat(stat_reply(42, 3, "rxe0", 1, kCounters), encode_error(42, 0));
  Decoded d = decode_messages(buf.data(), buf.size());
  CHECK_FALSE(d.malformed);
  CHECK(d.done);
  CHECK(d.error == 0);
  REQUIRE(d.stats.size() == 1);
  CHECK(d.stats[0].dev_index == 3);
  CHECK(d.stats[0].dev_name == "rxe0");
  CHECK(d.stats[0].port == 1);
  REQUIRE(d.stats[0].counters.size() == kCounters.size());
  for (std::size_t i = 0; i < kCounters.size(); ++i) {
    CHECK(d.stats[0].counters[i].name == kCounters[i].name);
    CHECK(d.stats[0].counters[i].value == kCounters[i].value);
  }
  CHECK(d.seqs == std::vector<std::uint32_t>{42, 42});
}

TEST_CASE("u64 values are 8-aligned behind PAD attributes, as nla_put_u64_64bit writes them") {
  auto msg = stat_reply(1, 1, "mlx5_0", 1, {{"rx_pkts", 1052612505}});
  // header 16 + DEV_INDEX 8 + DEV_NAME "mlx5_0\0" 12 + PORT 8 + nest 4 + entry 4 + name "rx_pkts\0" 12
  // = 64; a value attribute there would have its payload at 68, so a PAD (type 0, length 4) comes first.
  std::uint16_t pad_type = 0xffff, pad_len = 0;
  std::memcpy(&pad_len, msg.data() + 64, 2);
  std::memcpy(&pad_type, msg.data() + 66, 2);
  CHECK(pad_len == 4);
  CHECK(pad_type == 0);
  auto d = decode_messages(msg.data(), msg.size());
  REQUIRE(d.stats.size() == 1);
  CHECK(d.stats[0].counters.at(0).value == 1052612505);
}

TEST_CASE("the kernel's error answer is returned as a positive errno") {
  auto e = encode_error(9, -EINVAL);
  auto d = decode_messages(e.data(), e.size());
  CHECK(d.done);
  CHECK(d.error == EINVAL);
  CHECK(d.stats.empty());
  CHECK_FALSE(d.malformed);
}

TEST_CASE("a device dump lists index and name until DONE") {
  auto buf = cat(cat(MessageBuilder(nldev_type(kCmdGet), NLM_F_MULTI, 5).u32(kAttrDevIndex, 0).str(kAttrDevName, "rxe0").u32(kAttrPortIndex, 1).finish(),
                     MessageBuilder(nldev_type(kCmdGet), NLM_F_MULTI, 5).u32(kAttrDevIndex, 7).str(kAttrDevName, "mlx5_bond_0").finish()),
                 encode_done(5));
  auto d = decode_messages(buf.data(), buf.size());
  CHECK_FALSE(d.malformed);
  CHECK(d.done);
  REQUIRE(d.devices.size() == 2);
  CHECK(d.devices[0].index == 0);
  CHECK(d.devices[0].name == "rxe0");
  CHECK(d.devices[1].index == 7);
  CHECK(d.devices[1].name == "mlx5_bond_0");
}

TEST_CASE("requests encode to the exact bytes rdma statistic sends") {
  auto r = encode_stat_get(7, 3, 1);
  REQUIRE(r.size() == 32);
  nlmsghdr h;
  std::memcpy(&h, r.data(), sizeof h);
  CHECK(h.nlmsg_len == 32);
  CHECK(h.nlmsg_type == (5 << 10) + 17);
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK));
  CHECK(h.nlmsg_seq == 7);
  const std::uint8_t attrs[] = {8, 0, 1, 0, 3, 0, 0, 0, 8, 0, 3, 0, 1, 0, 0, 0};
  CHECK(std::memcmp(r.data() + 16, attrs, sizeof attrs) == 0);
  auto dump = encode_dev_dump(8);
  std::memcpy(&h, dump.data(), sizeof h);
  CHECK(dump.size() == 16);
  CHECK(h.nlmsg_type == (5 << 10) + 1);
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP));
}

TEST_CASE("every truncation of a reply is reported, never read past") {
  const auto full = cat(stat_reply(1, 2, "bnxt_re0", 1, kCounters), encode_error(1, 0));
  const std::size_t first = stat_reply(1, 2, "bnxt_re0", 1, kCounters).size();
  for (std::size_t n = 1; n < full.size(); ++n) {
    // A copy of exactly n bytes: ASan/valgrind see any read past it.
    std::vector<std::uint8_t> part(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto d = decode_messages(part.data(), part.size());
    INFO("length " << n);
    if (n == first) {
      CHECK_FALSE(d.malformed);
      CHECK_FALSE(d.done);
      CHECK(d.stats.size() == 1);
    } else {
      CHECK(d.malformed);
      CHECK_FALSE(d.done);
    }
  }
  CHECK(decode_messages(nullptr, 0).stats.empty());
  CHECK_FALSE(decode_messages(full.data(), 0).malformed);
}

TEST_CASE("broken attributes make the reply malformed") {
  SECTION("an entry without a value") {
    auto m = MessageBuilder(nldev_type(kCmdStatGet), 0, 1)
                 .u32(kAttrDevIndex, 1).u32(kAttrPortIndex, 1)
                 .begin_nest(kAttrStatHwCounters).begin_nest(kAttrStatHwCounterEntry)
                 .str(kAttrStatHwCounterEntryName, "x").end_nest().end_nest().finish();
    CHECK(decode_messages(m.data(), m.size()).malformed);
  }
  SECTION("a reply without a port") {
    auto m = MessageBuilder(nldev_type(kCmdStatGet), 0, 1).u32(kAttrDevIndex, 1).finish();
    CHECK(decode_messages(m.data(), m.size()).malformed);
  }
  SECTION("a nested length past its container") {
    auto m = stat_reply(1, 1, "rxe0", 1, {{"a", 1}});
    // the HWCOUNTERS nest starts after header 16 + 8 + "rxe0\0" 12 + 8 = 44
    std::uint16_t len = 0xfff0;
    std::memcpy(m.data() + 44, &len, 2);
    CHECK(decode_messages(m.data(), m.size()).malformed);
  }
  SECTION("an nlmsg_len shorter than a header") {
    auto m = encode_error(1, 0);
    std::uint32_t len = 8;
    std::memcpy(m.data(), &len, 4);
    CHECK(decode_messages(m.data(), m.size()).malformed);
  }
}

// A buffer cut inside a message: the messages before the cut decode whole, the cut one is
// malformed and gives no stats; a mutated one gives only named counters. Random bytes are the
// fuzz_rdma_netlink target's (tests/fuzz).
TEST_CASE("cut and mutated buffers: whole messages before a cut decode, the cut one is flagged") {
  const auto first = stat_reply(1, 2, "hfi1_0", 1, kCounters);
  const auto full = cat(first, encode_error(1, 0));
  for (std::size_t n = 1; n < full.size(); ++n) {
    INFO("cut to " << n << " of " << full.size() << " bytes (first message " << first.size() << ")");
    const auto d = decode_messages(full.data(), n);
    CHECK(d.malformed == (n != first.size()));
    if (n < first.size()) {
      CHECK(d.stats.empty());
    } else {
      REQUIRE(d.stats.size() == 1);
      REQUIRE(d.stats[0].counters.size() == kCounters.size());
      for (std::size_t i = 0; i < kCounters.size(); ++i) {
        CHECK(d.stats[0].counters[i].name == kCounters[i].name);
        CHECK(d.stats[0].counters[i].value == kCounters[i].value);
      }
      CHECK_FALSE(d.done);
    }
  }
  std::mt19937 rng(20261129);
  for (int i = 0; i < 20000; ++i) {
    auto m = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<std::uint8_t>(rng());
    const std::size_t n = rng() % (m.size() + 1);
    std::vector<std::uint8_t> part(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(n));
    auto d = decode_messages(part.data(), part.size());
    for (const auto& s : d.stats)
      for (const auto& c : s.counters) CHECK_FALSE(c.name.empty());
  }
}
