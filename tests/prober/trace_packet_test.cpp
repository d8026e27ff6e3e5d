#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <sys/socket.h>

#include <cstring>
#include <set>

#include "collectors/prober/wire/trace_packet.h"

using namespace rdma::collectors::prober;

TEST_CASE("trace_packet: source ports follow the kernel's flow label rule", "[trace]") {
  // Values worked by hand from include/rdma/ib_verbs.h.
  STATIC_REQUIRE(flow_label_to_udp_sport(0) == 0xC000);
  STATIC_REQUIRE(flow_label_to_udp_sport(0x3FFF) == 0xFFFF);
  STATIC_REQUIRE(flow_label_to_udp_sport(0x4001) == 0xC000);        // 1 ^ (0x4000 >> 14)
  STATIC_REQUIRE(flow_label_to_udp_sport(0xFFFFF) == 0xC000 | (0x3FFF ^ 0x3F));
  STATIC_REQUIRE(calc_flow_label(3, 5) == 15);                       // 15 ^ 0 ^ 0
  STATIC_REQUIRE(calc_flow_label(0x123456, 0x654321) == calc_flow_label(0x654321, 0x123456));
  STATIC_REQUIRE(qp_udp_sport(0, 3, 5) == (0xC000 | 15));
  STATIC_REQUIRE(qp_udp_sport(0x2A, 3, 5) == (0xC000 | 0x2A));
  for (std::uint16_t off : {std::uint16_t{0}, std::uint16_t{1}, std::uint16_t{0x1234}, std::uint16_t{0x3FFF}}) {
    CHECK(flow_label_for_offset(off) != 0);
    CHECK(flow_label_to_udp_sport(flow_label_for_offset(off)) == (0xC000 | off));
  }
}

TEST_CASE("trace_packet: a link's flows are evenly spaced and rotation visits the whole slot", "[trace]") {
  const auto seed = link_seed("peer-a/mlx5_0/1");
  for (unsigned flows : {1u, 2u, 3u, 4u, 8u}) {
    const unsigned width = 0x4000 / flows;
    std::set<std::uint16_t> ports;
    for (unsigned f = 0; f < flows; ++f) {
      const auto sport = flow_label_to_udp_sport(choose_flow_label(seed, f, flows, 0));
      CHECK((sport - 0xC000u) / width == f);  // flow f in slot f
      ports.insert(sport);
    }
    CHECK(ports.size() == flows);
  }
  // Power-of-two slot (4 flows: 4096 ports): 4096 rotations visit every port of it once.
  std::set<std::uint16_t> seen;
  for (std::uint64_t r = 0; r < 4096; ++r) seen.insert(flow_label_to_udp_sport(choose_flow_label(seed, 1, 4, r)));
  CHECK(seen.size() == 4096);
  CHECK(*seen.begin() == 0xC000 + 4096);
  // Consecutive rotations move far (about 0.618 of the slot), not to the next port.
  const int a = flow_label_to_udp_sport(choose_flow_label(seed, 0, 4, 0)), b = flow_label_to_udp_sport(choose_flow_label(seed, 0, 4, 1));
  CHECK(std::abs(a - b) > 1000);
  // Different links start at different offsets.
  CHECK(choose_flow_label(link_seed("peer-b/mlx5_0/1"), 0, 4, 0) != choose_flow_label(seed, 0, 4, 0));
  CHECK(choose_flow_label(seed, 0, 0, 0) != 0);  // 0 flows read as 1
}

TEST_CASE("trace_packet: at every flow count, a link's first labels take one slot each and each slot's rotations visit all its ports before repeating", "[trace]") {
  // flows 1..16 (the range `flows` accepts), including the widths that are not powers of two
  // (flows 5: 3,276 ports, whose plain 0.618 step shares a factor 9 with the width).
  for (const char* key : {"peer-a/mlx5_0/1/mlx5_0/1", "peer-b/mlx5_3/1/mlx5_3/1"}) {
    const auto seed = link_seed(key);
    for (unsigned flows = 1; flows <= 16; ++flows) {
      CAPTURE(key, flows);
      const unsigned width = 0x4000 / flows;
      std::set<unsigned> slots;
      for (unsigned f = 0; f < flows; ++f) slots.insert((flow_label_to_udp_sport(choose_flow_label(seed, f, flows, 0)) - 0xC000u) / width);
      CHECK(slots.size() == flows);
      CHECK(*slots.rbegin() == flows - 1);  // slot f is flow f's: none beyond the last
      for (unsigned f = 0; f < flows; ++f) {
        std::set<std::uint16_t> seen;
        bool inside = true;
        for (std::uint64_t r = 0; r < width; ++r) {
          const unsigned off = flow_label_to_udp_sport(choose_flow_label(seed, f, flows, r)) - 0xC000u;
          inside = inside && off / width == f;
          seen.insert(static_cast<std::uint16_t>(off));
        }
        CHECK(inside);
        CHECK(seen.size() == width);  // `width` rotations: every port of the slot once
        CHECK(choose_flow_label(seed, f, flows, width) == choose_flow_label(seed, f, flows, 0));  // then it repeats
      }
    }
  }
}

TEST_CASE("trace_packet: the packet is a BTH no NIC accepts, with the destination QP", "[trace]") {
  const auto p = build_trace_packet(0xABCDEF, 7);
  CHECK(p.size() == 16);
  CHECK(p[0] == 0x1F);           // reserved RC opcode
  CHECK((p[1] & 0x0F) == 0x0F);  // TVer 0xF (only 0 is valid)
  CHECK(p[2] == 0);
  CHECK(p[3] == 0);  // P_Key 0x0000
  CHECK(p[5] == 0xAB);
  CHECK(p[6] == 0xCD);
  CHECK(p[7] == 0xEF);
  CHECK(p[12] == 0);
  CHECK(p[15] == 0);  // ICRC 0
  const auto f = parse_trace_packet(p);
  REQUIRE(f);
  CHECK(f->dest_qpn == 0xABCDEF);
  CHECK(f->seq == 7);
  auto q = p;
  q[1] = 0;  // a valid TVer: not ours
  CHECK_FALSE(parse_trace_packet(q));
  CHECK_FALSE(parse_trace_packet(std::span(p).first(12)));
}

namespace {
std::vector<std::uint8_t> control_of(int level, int type, const sock_extended_err& e, const std::string& v4) {
  std::vector<std::uint8_t> buf(CMSG_SPACE(sizeof(e) + sizeof(sockaddr_in)));
  cmsghdr h{};
  h.cmsg_level = level;
  h.cmsg_type = type;
  h.cmsg_len = CMSG_LEN(sizeof(e) + sizeof(sockaddr_in));
  std::memcpy(buf.data(), &h, sizeof(h));
  std::memcpy(buf.data() + CMSG_LEN(0), &e, sizeof(e));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, v4.c_str(), &a.sin_addr);
  std::memcpy(buf.data() + CMSG_LEN(0) + sizeof(e), &a, sizeof(a));
  return buf;
}
}  // namespace

TEST_CASE("trace_packet: error queue answers are read with their offender", "[trace]") {
  sock_extended_err e{};
  e.ee_errno = EHOSTUNREACH;
  e.ee_origin = SO_EE_ORIGIN_ICMP;
  e.ee_type = ICMP_TIME_EXCEEDED;
  auto a = decode_error_queue(control_of(SOL_IP, IP_RECVERR, e, "10.1.0.1"));
  REQUIRE(a);
  CHECK(a->kind == HopAnswer::Kind::kTimeExceeded);
  CHECK(a->from == "10.1.0.1");
  e.ee_type = ICMP_DEST_UNREACH;
  a = decode_error_queue(control_of(SOL_IP, IP_RECVERR, e, "10.2.0.2"));
  REQUIRE(a);
  CHECK(a->kind == HopAnswer::Kind::kUnreachable);
  e.ee_origin = SO_EE_ORIGIN_LOCAL;
  a = decode_error_queue(control_of(SOL_IP, IP_RECVERR, e, "10.2.0.2"));
  REQUIRE(a);
  CHECK(a->kind == HopAnswer::Kind::kOther);
  // Another control message only, a truncated one, nothing.
  CHECK_FALSE(decode_error_queue(control_of(SOL_IP, IP_TTL, e, "10.2.0.2")));
  auto buf = control_of(SOL_IP, IP_RECVERR, e, "10.2.0.2");
  CHECK_FALSE(decode_error_queue(std::span(buf).first(CMSG_LEN(4))));
  CHECK_FALSE(decode_error_queue({}));
}

TEST_CASE("trace_packet: the token bucket bounds the rate", "[trace]") {
  using namespace std::chrono_literals;
  TokenBucket b(4, 2);
  const auto t0 = TokenBucket::Clock::time_point{} + 100s;
  CHECK(b.take(t0));
  CHECK(b.take(t0));
  CHECK_FALSE(b.take(t0));  // burst spent
  CHECK(b.next(t0) > t0);
  CHECK(b.next(t0) <= t0 + 251ms);
  CHECK_FALSE(b.take(t0 + 200ms));
  CHECK(b.take(t0 + 250ms));
  int taken = 0;  // over 10 s at 4/s: 40 (+ the burst refilled at most)
  for (int ms = 0; ms <= 10000; ms += 10) taken += b.take(t0 + 250ms + std::chrono::milliseconds(ms)) ? 1 : 0;
  CHECK(taken >= 39);
  CHECK(taken <= 42);
}

TEST_CASE("trace_packet: hop lists mark silent hops and add nothing the trace did not read", "[trace]") {
  CHECK(hop_list({"a", "", "c"}) == std::vector<std::string>{"a", "*", "c"});
  CHECK(hop_list({"a", "", ""}) == std::vector<std::string>{"a"});  // trailing silence cut
  CHECK(hop_list({"a", "b", "d"}) == std::vector<std::string>{"a", "b", "d"});
  CHECK(hop_list({"a", "b", ""}) == std::vector<std::string>{"a", "b"});  // stopped early: partial, no destination added
  CHECK(hop_list({}).empty());
}

namespace {
HopAnswer icmp_answer(HopAnswer::Kind kind, const std::string& from) {
  HopAnswer a;
  a.kind = kind;
  a.icmp = true;
  a.from = from;
  return a;
}
}  // namespace

TEST_CASE("trace_packet: an answer counts only when its quote holds this trace's packet, over every truncation", "[trace]") {
  const std::uint32_t qpn = 0x123456, sent_ttl = 5;
  const auto te = icmp_answer(HopAnswer::Kind::kTimeExceeded, "10.0.1.1");
  const auto pkt = build_trace_packet(qpn, 3);
  // What the kernel hands back is the quote past the UDP header, as long as the router quoted:
  // RFC 792's minimum (IP header + 8 bytes) is 0 bytes of it, a Linux router quotes all 16, an
  // RFC 4884 answer pads the quote to 128 bytes (100 past the UDP header) with zeros.
  std::vector<std::uint8_t> quote(pkt.begin(), pkt.end());
  quote.resize(100, 0);
  for (std::size_t n = 0; n <= quote.size(); ++n) {
    CAPTURE(n);
    const auto c = check_answer(te, std::span(quote).first(n), qpn, sent_ttl);
    if (n < kMinQuotedBth) {
      CHECK(std::string(c.reason) == "short_quote");  // ports only (checked by the kernel): no QP, no TTL
      CHECK(c.ttl == 0);
    } else {
      CHECK(std::string(c.reason).empty());
      CHECK(c.ttl == 3);
    }
  }
  // Every truncation of another flow's packet, or of a TTL not sent, or of no trace packet.
  for (std::size_t n = kMinQuotedBth; n <= kTracePacketSize; ++n) {
    CAPTURE(n);
    const auto other = build_trace_packet(qpn + 1, 3);
    CHECK(std::string(check_answer(te, std::span(other).first(n), qpn, sent_ttl).reason) == "wrong_qpn");
    const auto later = build_trace_packet(qpn, sent_ttl + 1);
    CHECK(std::string(check_answer(te, std::span(later).first(n), qpn, sent_ttl).reason) == "wrong_psn");
    const auto zero = build_trace_packet(qpn, 0);
    CHECK(std::string(check_answer(te, std::span(zero).first(n), qpn, sent_ttl).reason) == "wrong_psn");
    for (std::size_t byte : {0u, 1u, 2u, 3u, 4u, 8u}) {
      auto forged = pkt;
      forged[byte] ^= 0x40;
      CHECK(std::string(check_answer(te, std::span(forged).first(n), qpn, sent_ttl).reason) == "not_trace");
    }
    if (n > kMinQuotedBth) {
      auto icrc = pkt;
      icrc[n - 1] = 1;  // the quoted ICRC is not the zero sent
      CHECK(std::string(check_answer(te, std::span(icrc).first(n), qpn, sent_ttl).reason) == "not_trace");
    }
  }
  // An unreachable (the destination's port unreachable, a router's) is checked alike.
  const auto unreach = icmp_answer(HopAnswer::Kind::kUnreachable, "10.0.9.2");
  CHECK(std::string(check_answer(unreach, {}, qpn, sent_ttl).reason) == "short_quote");
  CHECK(check_answer(unreach, pkt, qpn, sent_ttl).ttl == 3);
  // No ICMP (a local error), another ICMP type: never an answer, whatever they quote.
  HopAnswer local = te;
  local.icmp = false;
  CHECK(std::string(check_answer(local, pkt, qpn, sent_ttl).reason) == "local");
  CHECK(std::string(check_answer(icmp_answer(HopAnswer::Kind::kOther, "10.0.1.1"), pkt, qpn, sent_ttl).reason) ==
        "other_type");
  CHECK(std::string(check_answer(icmp_answer(HopAnswer::Kind::kTimeExceeded, ""), pkt, qpn, sent_ttl).reason) == "local");
}
