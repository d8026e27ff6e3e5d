#include <catch2/catch.hpp>

#include <random>

#include "collectors/prober/wire/handshake.h"

using namespace rdma::collectors::prober;

namespace {
Endpoint endpoint() {
  Endpoint e;
  e.qpn = 0x11;
  e.psn = 0xabcdef;
  e.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1};
  e.mtu = 3;
  e.is_global = 1;
  e.addr = 0x7f0000001000;
  e.rkey = 0x1234;
  e.length = 64;
  return e;
}
Hello hello() {
  Hello h;
  h.nonce = random_nonce();
  h.instance = 42;
  h.endpoint = endpoint();
  h.endpoint.length = 0;
  h.name = "node-a";
  return h;
}
const Nonce kServer = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// Two RoCE rails (IPv4 and IPv6 GIDs on a VLAN netdev) and an InfiniBand port without a rail.
PortTable table() {
  PortTable t;
  t.name = "node-b";
  TablePort r1{"rxeB1", 1, LinkLayer::kEthernet, 4, 0, 0xfe80000000000000, "rail1", {}};
  r1.gids.push_back({{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 0, 2}, GidKind::kRoceV2, 24, "b1.100"});
  r1.gids.push_back({{0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, GidKind::kRoceV2, 64, "b1.100"});
  TablePort r2{"rxeB2", 1, LinkLayer::kEthernet, 4, 0, 0xfe80000000000000, "rail2", {}};
  r2.gids.push_back({{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 2, 0, 2}, GidKind::kRoceV2, 24, "b2"});
  TablePort ib{"mlx5_0", 1, LinkLayer::kInfiniBand, 1, 0x1a, 0xfe80000000000001, "", {}};
  ib.gids.push_back({{0xfe, 0x80, 0, 0, 0, 0, 0, 1, 0, 2, 0xc9, 3, 0, 4, 5, 6}, GidKind::kIb, 0, ""});
  t.ports = {r1, r2, ib};
  return t;
}
}  // namespace

TEST_CASE("every message round-trips through encode and decode") {
  Accept a{endpoint(), "node-b"};
  SessionHello sh{hello(), SessionKind::kWriteLatency, 65536};
  for (const Message& m : {Message{Challenge{kServer}}, Message{hello()}, Message{a}, Message{Reject{RejectReason::kSelf}},
                           Message{sh}, Message{Reject{RejectReason::kNoSecret}}, Message{PortRequest{kServer}},
                           Message{table()}, Message{PortTable{"empty", {}}},
                           Message{TargetedHello{hello(), "rxeB1", 1, endpoint().gid}}}) {
    auto bytes = encode_frame(m, "s3cret", kServer);
    REQUIRE(frame_size(std::span(bytes).first(kHeaderSize)) == bytes.size());
    auto d = decode_frame(bytes, "s3cret", kServer);
    REQUIRE(d.status == DecodeStatus::kOk);
    CHECK(*d.message == m);
  }
}

TEST_CASE("frames with the wrong secret or for another nonce are rejected") {
  auto bytes = encode_frame(hello(), "s3cret", kServer);
  CHECK(decode_frame(bytes, "other", kServer).status == DecodeStatus::kBadMac);
  CHECK(decode_frame(bytes, "", kServer).status == DecodeStatus::kBadMac);
  Nonce replayed = kServer;
  replayed[0] ^= 1;
  CHECK(decode_frame(bytes, "s3cret", replayed).status == DecodeStatus::kBadMac);
  // no secret on both sides still works and still detects corruption
  auto plain = encode_frame(hello(), "", kServer);
  CHECK(decode_frame(plain, "", kServer).status == DecodeStatus::kOk);
  CHECK(decode_frame(plain, "s3cret", kServer).status == DecodeStatus::kBadMac);
}

TEST_CASE("header checks: magic, version, type, length, trailing bytes") {
  const auto good = encode_frame(hello(), "k", kServer);
  auto with = [&](std::size_t i, std::uint8_t v) {
    auto b = good;
    b[i] = v;
    return decode_frame(b, "k", kServer).status;
  };
  CHECK(with(0, 'X') == DecodeStatus::kBadMagic);
  CHECK(with(4, 2) == DecodeStatus::kBadVersion);
  CHECK(with(4, 0) == DecodeStatus::kBadVersion);
  CHECK(with(5, 9) == DecodeStatus::kBadType);
  CHECK(with(5, 3) == DecodeStatus::kBadLength);  // an accept body has another size
  CHECK(with(11, 0xff) == DecodeStatus::kBadLength);
  CHECK(with(8, 0x7f) == DecodeStatus::kBadLength);  // a huge announced length is refused, not read
  CHECK(with(6, 1) == DecodeStatus::kBadField);
  CHECK_FALSE(frame_size(std::span(good).first(4)));
  auto longer = good;
  longer.push_back(0);
  CHECK(decode_frame(longer, "k", kServer).status == DecodeStatus::kTrailing);
}

TEST_CASE("every truncation is rejected as truncated") {
  const auto good = encode_frame(Accept{endpoint(), "b"}, "k", kServer);
  for (std::size_t n = 0; n < good.size(); ++n)
    CHECK(decode_frame(std::span(good).first(n), "k", kServer).status == DecodeStatus::kTruncated);
}

TEST_CASE("flipping any single bit of a frame makes it invalid") {
  const auto good = encode_frame(hello(), "k", kServer);
  for (std::size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] ^= static_cast<std::uint8_t>(1 << bit);
      CHECK(decode_frame(b, "k", kServer).status != DecodeStatus::kOk);
    }
}

TEST_CASE("authentic frames with bad fields are rejected") {
  Hello h = hello();
  h.endpoint.qpn = 0;  // QP 0 is special
  CHECK(decode_frame(encode_frame(h, "k", kServer), "k", kServer).status == DecodeStatus::kBadField);
  h = hello();
  h.endpoint.mtu = 9;
  CHECK(decode_frame(encode_frame(h, "k", kServer), "k", kServer).status == DecodeStatus::kBadField);
  h = hello();
  h.name = std::string("a\nb");
  CHECK(decode_frame(encode_frame(h, "k", kServer), "k", kServer).status == DecodeStatus::kBadField);
  Accept a{endpoint(), "b"};
  a.endpoint.length = 0;  // nothing to write into
  CHECK(decode_frame(encode_frame(a, "k", kServer), "k", kServer).status == DecodeStatus::kBadField);
  CHECK(decode_frame(encode_frame(Reject{static_cast<RejectReason>(77)}, "k", kServer), "k", kServer).status ==
        DecodeStatus::kBadField);
  h = hello();
  h.name = std::string(100, 'x');  // longer names are cut to the field
  auto d = decode_frame(encode_frame(h, "k", kServer), "k", kServer);
  REQUIRE(d.status == DecodeStatus::kOk);
  CHECK(std::get<Hello>(*d.message).name == std::string(kNameSize, 'x'));
}

TEST_CASE("session hellos: kind and buffer size are checked, the body size is their own") {
  auto status = [](const SessionHello& sh) { return decode_frame(encode_frame(sh, "k", kServer), "k", kServer).status; };
  CHECK(status({hello(), SessionKind::kWriteBandwidth, kMaxSessionBuffer}) == DecodeStatus::kOk);
  CHECK(status({hello(), SessionKind::kWriteBandwidth, 0}) == DecodeStatus::kBadField);
  CHECK(status({hello(), SessionKind::kWriteBandwidth, kMaxSessionBuffer + 1}) == DecodeStatus::kBadField);
  CHECK(status({hello(), static_cast<SessionKind>(3), 64}) == DecodeStatus::kBadField);
  Hello bad = hello();
  bad.endpoint.qpn = 1;
  CHECK(status({bad, SessionKind::kWriteLatency, 64}) == DecodeStatus::kBadField);
  // a hello relabelled as a session hello (or back) has the other type's length
  auto b = encode_frame(hello(), "k", kServer);
  b[5] = static_cast<std::uint8_t>(FrameType::kSessionHello);
  CHECK(decode_frame(b, "k", kServer).status == DecodeStatus::kBadLength);
  b = encode_frame(SessionHello{hello(), SessionKind::kWriteBandwidth, 64}, "k", kServer);
  CHECK(frame_size(std::span(b).first(kHeaderSize)) == b.size());
  b[5] = static_cast<std::uint8_t>(FrameType::kHello);
  CHECK(decode_frame(b, "k", kServer).status == DecodeStatus::kBadLength);
  CHECK(reject_label(RejectReason::kNoSecret) == "no_secret");
}

TEST_CASE("targeted hellos name a device and a port, and their body size is their own") {
  auto status = [](const TargetedHello& th) { return decode_frame(encode_frame(th, "k", kServer), "k", kServer).status; };
  CHECK(status({hello(), "mlx5_3", 255, {}}) == DecodeStatus::kOk);
  CHECK(status({hello(), "", 1, {}}) == DecodeStatus::kBadField);
  CHECK(status({hello(), "mlx5_3", 0, {}}) == DecodeStatus::kBadField);
  CHECK(status({hello(), "mlx5\n3", 1, {}}) == DecodeStatus::kBadField);
  Hello bad = hello();
  bad.endpoint.mtu = 0;
  CHECK(status({bad, "mlx5_3", 1, {}}) == DecodeStatus::kBadField);
  // a hello relabelled as a targeted hello has the other type's length
  auto b = encode_frame(hello(), "k", kServer);
  b[5] = static_cast<std::uint8_t>(FrameType::kTargetedHello);
  CHECK(decode_frame(b, "k", kServer).status == DecodeStatus::kBadLength);
}

TEST_CASE("port tables: every count and string is bounded, every byte accounted for") {
  auto decode = [](const PortTable& t) { return decode_frame(encode_frame(t, "k", kServer), "k", kServer); };
  // the largest table the bounds allow fits kMaxPortTableBody exactly and decodes
  PortTable big{std::string(kNameSize, 'n'), {}};
  for (std::size_t i = 0; i < kMaxTablePorts; ++i) {
    TablePort p{std::string(kMaxTableString, 'd'), 255, LinkLayer::kEthernet, 5, 0xffff, ~0ull,
                std::string(kMaxTableString, 'r'), {}};
    for (std::size_t g = 0; g < kMaxPortGids; ++g)
      p.gids.push_back({Gid{}, GidKind::kRoceV1, 128, std::string(kMaxTableString, 'v')});
    big.ports.push_back(p);
  }
  auto bytes = encode_frame(big, "k", kServer);
  CHECK(bytes.size() == kHeaderSize + kMaxPortTableBody + kMacSize);
  REQUIRE(decode(big).status == DecodeStatus::kOk);
  CHECK(std::get<PortTable>(*decode(big).message) == big);
  // longer strings and lists are cut to their bounds on encode
  auto cut = big;
  cut.ports.push_back(cut.ports.front());
  cut.ports[0].device += "xyz";
  cut.ports[0].gids.push_back(cut.ports[0].gids.front());
  auto d = decode(cut);
  REQUIRE(d.status == DecodeStatus::kOk);
  CHECK(std::get<PortTable>(*d.message) == big);
  // bad fields
  auto bad = [&](auto&& mutate) {
    auto t = table();
    mutate(t);
    return decode(t).status;
  };
  CHECK(bad([](PortTable& t) { t.ports[0].device.clear(); }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[0].port = 0; }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[0].state = 6; }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[0].link_layer = static_cast<LinkLayer>(3); }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[0].gids[0].kind = static_cast<GidKind>(0); }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[0].gids[0].prefix_len = 129; }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[1].rail = "rail\n2"; }) == DecodeStatus::kBadField);
  CHECK(bad([](PortTable& t) { t.ports[0].gids[1].netdev = std::string("b\0", 2); }) == DecodeStatus::kBadField);
  // counts that claim more than the body holds, or less, or more than their bound (mac recomputed)
  auto with_body = [](std::vector<std::uint8_t> b, std::size_t at, std::uint8_t v) {
    b.resize(b.size() - kMacSize);
    b[kHeaderSize + at] = v;
    auto mac = hmac_sha256("k", [&] {
      auto data = b;
      data.insert(data.end(), kServer.begin(), kServer.end());
      return data;
    }());
    b.insert(b.end(), mac.begin(), mac.end());
    return decode_frame(b, "k", kServer).status;
  };
  const auto t = encode_frame(table(), "k", kServer);
  CHECK(with_body(t, kNameSize, 3) == DecodeStatus::kOk);
  CHECK(with_body(t, kNameSize, 4) == DecodeStatus::kBadField);   // a fourth port past the end
  CHECK(with_body(t, kNameSize, 2) == DecodeStatus::kBadField);   // the third port left over
  CHECK(with_body(t, kNameSize, kMaxTablePorts + 1) == DecodeStatus::kBadField);
  CHECK(with_body(t, kNameSize + 1, 200) == DecodeStatus::kBadField);  // device length past the end
  // the header: under the minimum or over the bound is a bad length, never read
  auto b = t;
  b[8] = 0, b[9] = 0, b[10] = 0, b[11] = kNameSize;
  CHECK(decode_frame(b, "k", kServer).status == DecodeStatus::kBadLength);
  const auto over = kMaxPortTableBody + 1;
  b[8] = 0, b[9] = static_cast<std::uint8_t>(over >> 16), b[10] = static_cast<std::uint8_t>(over >> 8),
  b[11] = static_cast<std::uint8_t>(over);
  CHECK(decode_frame(b, "k", kServer).status == DecodeStatus::kBadLength);
  CHECK_FALSE(frame_size(std::span(b).first(kHeaderSize)));
  // every truncation of a table is truncated
  for (std::size_t n = 0; n < t.size(); ++n)
    CHECK(decode_frame(std::span(t).first(n), "k", kServer).status == DecodeStatus::kTruncated);
  // a port request relabelled as a table is too short to be one
  auto req = encode_frame(PortRequest{kServer}, "k", kServer);
  req[5] = static_cast<std::uint8_t>(FrameType::kPortTable);
  CHECK(decode_frame(req, "k", kServer).status == DecodeStatus::kBadLength);
}

TEST_CASE("random garbage never decodes and never crashes") {
  std::mt19937 rng(12345);
  const auto good = encode_frame(hello(), "k", kServer);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> b(rng() % 300);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    if (i % 2 && b.size() >= kHeaderSize) std::copy(good.begin(), good.begin() + kHeaderSize, b.begin());  // valid header
    auto d = decode_frame(b, "k", kServer);
    CHECK(d.status != DecodeStatus::kOk);
    CHECK_FALSE(d.message);
    (void)frame_size(b);
  }
}

TEST_CASE("hmac-sha256 matches RFC 4231 test case 2 and compares in constant time") {
  const std::string data = "what do ya want for nothing?";
  auto mac = hmac_sha256("Jefe", std::span(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()));
  const std::array<std::uint8_t, 32> want = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                             0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                             0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  CHECK(mac == want);
  CHECK(equal_constant_time(mac, want));
  auto other = want;
  other[31] ^= 1;
  CHECK_FALSE(equal_constant_time(mac, other));
  CHECK_FALSE(equal_constant_time(std::span(mac).first(31), want));
}
