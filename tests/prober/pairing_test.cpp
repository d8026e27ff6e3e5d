#include <catch2/catch.hpp>

#include "collectors/prober/engine/pairing.h"

using namespace rdma::collectors::prober;

namespace {
Gid v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}
const Gid kLinkLocal = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7};
TablePort roce(std::string dev, std::string netdev, Gid g, std::uint8_t prefix, std::string rail = "") {
  TablePort p{std::move(dev), 1, LinkLayer::kEthernet, 4, 0, 0xfe80000000000000, std::move(rail), {}};
  p.gids.push_back({kLinkLocal, GidKind::kRoceV2, 64, netdev});    // never used to route
  p.gids.push_back({g, GidKind::kRoceV1, prefix, netdev});        // v1: not routable
  p.gids.push_back({g, GidKind::kRoceV2, prefix, netdev});
  return p;
}
TablePort ib(std::string dev, std::uint64_t prefix, std::uint8_t last) {
  TablePort p{std::move(dev), 1, LinkLayer::kInfiniBand, 4, 5, prefix, "", {}};
  p.gids.push_back({{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last}, GidKind::kIb, 0, ""});
  return p;
}
// The ECMP lab: rail 1 is 10.1.0.0/24 on a1/b1, rail 2 10.2.0.0/24 on a2/b2; A's ports listed in
// the other order than B's so that a pairing by position would be caught.
std::vector<TablePort> node_a() { return {roce("rxeA2", "a2", v4(10, 2, 0, 1), 24), roce("rxeA1", "a1", v4(10, 1, 0, 1), 24)}; }
std::vector<TablePort> node_b() { return {roce("rxeB1", "b1", v4(10, 1, 0, 2), 24), roce("rxeB2", "b2", v4(10, 2, 0, 2), 24)}; }
}  // namespace

TEST_CASE("pairing by subnet: rail 1 with rail 1, rail 2 with rail 2, no cross-rail pair") {
  auto pairs = pair_ports(node_a(), node_b(), false);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].local == 0);
  CHECK(pairs[0].peer == 1);
  CHECK(pairs[0].rail == "10.2.0.0/24");
  CHECK(pairs[0].source == v4(10, 2, 0, 1));
  CHECK(pairs[0].dest == v4(10, 2, 0, 2));
  CHECK(pairs[1].local == 1);
  CHECK(pairs[1].peer == 0);
  CHECK(pairs[1].rail == "10.1.0.0/24");
  CHECK(pairs[1].dest == v4(10, 1, 0, 2));
}

TEST_CASE("pairing by rail labels: config rules name the local ports, the peer's labels come from its table") {
  std::vector<RailRule> rules = {{"rail1", std::regex("^rxeA1$"), std::nullopt}, {"rail2", std::nullopt, std::regex("^a2")}};
  auto a = node_a();
  for (auto& p : a) p.rail = rail_of(p, rules);
  CHECK(a[0].rail == "rail2");
  CHECK(a[1].rail == "rail1");
  CHECK(rail_of(roce("mlx5_0", "eth0", v4(10, 9, 0, 1), 24), rules).empty());
  auto b = node_b();
  b[0].rail = "rail1", b[1].rail = "rail2";
  auto pairs = pair_ports(a, b, false);
  REQUIRE(pairs.size() == 2);
  CHECK((pairs[0].local == 0 && pairs[0].peer == 1 && pairs[0].rail == "rail2"));
  CHECK((pairs[1].local == 1 && pairs[1].peer == 0 && pairs[1].rail == "rail1"));
  CHECK(pairs[1].source == v4(10, 1, 0, 1));
  // labels win over subnets: rails named crosswise pair crosswise
  b[0].rail = "rail2", b[1].rail = "rail1";
  pairs = pair_ports(a, b, false);
  REQUIRE(pairs.size() == 2);
  CHECK((pairs[0].local == 0 && pairs[0].peer == 0));
  // a peer without labels falls back to subnets, under the local label
  for (auto& p : b) p.rail.clear();
  pairs = pair_ports(a, b, false);
  REQUIRE(pairs.size() == 2);
  CHECK((pairs[0].peer == 1 && pairs[0].rail == "rail2"));
}

TEST_CASE("cross_rail pairs every local port with every peer port of its link layer") {
  auto b = node_b();
  b.push_back(ib("mlx5_0", 0xfe80000000000000, 1));
  auto pairs = pair_ports(node_a(), b, true);
  REQUIRE(pairs.size() == 4);
  for (const auto& p : pairs) CHECK(p.peer < 2);
  CHECK(pairs[0].rail == "10.2.0.0/24");
  CHECK(pairs[1].rail == "10.2.0.0/24");  // the local port's rail, whichever peer port
  CHECK(pairs[1].source == v4(10, 2, 0, 1));
}

TEST_CASE("subnet pairing: the shorter prefix, one family, routable v2 GIDs only") {
  // a /16 on one side holds the other's /24
  auto pairs = pair_ports({roce("a", "a", v4(10, 1, 0, 1), 16)}, {roce("b", "b", v4(10, 1, 7, 2), 24)}, false);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].rail == "10.1.0.0/16");
  CHECK(pair_ports({roce("a", "a", v4(10, 1, 0, 1), 24)}, {roce("b", "b", v4(10, 1, 7, 2), 24)}, false).empty());
  // IPv6
  Gid g6a = {0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  Gid g6b = g6a;
  g6b[15] = 2;
  pairs = pair_ports({roce("a", "a", g6a, 64)}, {roce("b", "b", g6b, 64)}, false);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].rail == "fd00:1:0:0:0:0:0:0/64");
  CHECK(pairs[0].dest == g6b);
  // IPv4 never pairs with IPv6, and link-local GIDs alone never pair
  CHECK(pair_ports({roce("a", "a", v4(253, 0, 0, 1), 8)}, {roce("b", "b", g6b, 64)}, false).empty());
  TablePort only_ll{"c", 1, LinkLayer::kEthernet, 4, 0, 0, "", {{kLinkLocal, GidKind::kRoceV2, 64, "c"}}};
  CHECK(pair_ports({only_ll}, {only_ll}, false).empty());
  // a port without GIDs pairs with nothing, and nothing crashes
  TablePort bare{"d", 1, LinkLayer::kEthernet, 1, 0, 0, "", {}};
  CHECK(pair_ports({bare}, node_b(), false).empty());
  CHECK(pair_ports({bare}, {bare}, true).size() == 1);
}

TEST_CASE("InfiniBand ports pair by subnet prefix, never with RoCE ports") {
  std::vector<TablePort> local = {ib("mlx5_0", 0xfe80000000000001, 1), ib("mlx5_1", 0xfe80000000000002, 2)};
  std::vector<TablePort> peer = {ib("mlx5_1", 0xfe80000000000002, 3), ib("mlx5_0", 0xfe80000000000001, 4)};
  peer.push_back(roce("rxe0", "e", v4(10, 1, 0, 2), 24));
  auto pairs = pair_ports(local, peer, false);
  REQUIRE(pairs.size() == 2);
  CHECK((pairs[0].local == 0 && pairs[0].peer == 1 && pairs[0].rail == "fe80:0:0:1/64"));
  CHECK(pairs[0].dest == peer[1].gids[0].gid);
  CHECK((pairs[1].local == 1 && pairs[1].peer == 0 && pairs[1].rail == "fe80:0:0:2/64"));
}

TEST_CASE("a rail rule's label takes the groups of its regex: one rule names every rail of a node") {
  const std::vector<RailRule> rules = {{"rail$1", std::regex("^mlx5_(\\d+)$"), std::nullopt},
                                       {"vlan-$2", std::nullopt, std::regex("^(eth\\d+)\\.(\\d+)$")}};
  CHECK(rail_of(roce("mlx5_3", "ens1", v4(10, 3, 0, 1), 24), rules) == "rail3");
  CHECK(rail_of(roce("mlx5_12", "ens1", v4(10, 3, 0, 1), 24), rules) == "rail12");
  CHECK(rail_of(roce("bnxt_re0", "eth2.300", v4(10, 3, 0, 1), 24), rules) == "vlan-300");
  CHECK(rail_of(roce("bnxt_re0", "eth2", v4(10, 3, 0, 1), 24), rules).empty());
}

TEST_CASE("a peer reached at one of its port's subnets is probed in that subnet") {
  // both ports have 10.77.0.0/24 first and 10.78.0.0/24 second; the peer was given as 10.78.0.2
  auto a = roce("rxe0", "veth0", v4(10, 77, 0, 1), 24);
  a.gids.push_back({v4(10, 78, 0, 1), GidKind::kRoceV2, 24, "veth0"});
  auto b = roce("rxe1", "veth1", v4(10, 77, 0, 2), 24);
  b.gids.push_back({v4(10, 78, 0, 2), GidKind::kRoceV2, 24, "veth1"});
  auto pairs = pair_ports({a}, {b}, false);
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].dest == v4(10, 77, 0, 2));
  pairs = pair_ports({a}, {b}, false, v4(10, 78, 0, 2));
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].source == v4(10, 78, 0, 1));
  CHECK(pairs[0].dest == v4(10, 78, 0, 2));
  CHECK(pairs[0].rail == "10.78.0.0/24");
}
