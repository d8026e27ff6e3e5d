// Forwarding tables and routes: SwitchInfo and LinearForwardingTable blocks decode where
// libibmad encodes them, the block count up to LinearFDBTop, and routes walked over a synthetic
// topology: through one and two switches, to a switch LID, to itself, and each failure as a value
// (loop, missing entry, entry beyond LinearFDBTop, unknown LID, unknown source, a switch with no
// table, an entry to a port with no cable or to a CA that is not the destination); the IB feed of
// rdma::model::suspect_links (routes as paths, cables only) and the pair lists /pma/routes/suspects takes.
#include <infiniband/mad.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <random>
#include <vector>

#include "collectors/pma/fabric.h"
#include "collectors/pma/fabric_routes.h"
#include "collectors/pma/fabric_probe_routes.h"
#include "collectors/pma/fabric_suspects.h"
#include "tests/lib/samples.h"
#include "sources/mad/lft_decode.h"

using namespace rdma::collectors::pma;
using namespace rdma::mad;

namespace {
void put32(std::uint8_t* buf, enum MAD_FIELDS f, std::uint32_t v) { mad_encode_field(buf, f, &v); }

// ca-a (guid 1, LID 1) - sw1 port 1; sw1 port 2 - sw2 port 1; ca-b (guid 2, LID 2) - sw1 port 3;
// ca-c (guid 3, LID 3) - sw2 port 2. sw1 has LID 10, sw2 LID 20.
FabricPort cable(std::uint8_t number, std::uint16_t lid, std::uint64_t remote, const char* remote_name, int remote_port) {
  FabricPort p;
  p.number = number;
  p.lid = lid;
  p.remote_guid_value = remote;
  p.remote_guid = guid_label(remote);
  p.remote_name = remote_name;
  p.remote_port = std::to_string(remote_port);
  return p;
}
FabricNode node(std::uint64_t guid, const char* name, const char* type, std::uint16_t lid, std::vector<FabricPort> ports) {
  FabricNode n;
  n.guid = guid;
  n.guid_label = guid_label(guid);
  n.name = name;
  n.type = type;
  n.lid = lid;
  n.ports = std::move(ports);
  return n;
}
Topology topology() {
  Topology t;
  t.nodes = {node(1, "ca-a", "ca", 1, {cable(1, 1, 10, "sw1", 1)}),
             node(2, "ca-b", "ca", 2, {cable(1, 2, 10, "sw1", 3)}),
             node(3, "ca-c", "ca", 3, {cable(1, 3, 20, "sw2", 2)}),
             node(10, "sw1", "switch", 10, {cable(1, 10, 1, "ca-a", 1), cable(2, 10, 20, "sw2", 1), cable(3, 10, 2, "ca-b", 1)}),
             node(20, "sw2", "switch", 20, {cable(1, 20, 10, "sw1", 2), cable(2, 20, 3, "ca-c", 1)})};
  for (std::size_t i = 0; i < t.nodes.size(); ++i) t.by_guid[t.nodes[i].guid] = i;
  return t;
}
// The tables opensm would write for that fabric (LIDs 0..20).
ForwardingTables tables() {
  ForwardingTables t;
  std::vector<std::uint8_t> sw1(21, kLftNoPort), sw2(21, kLftNoPort);
  sw1[1] = 1, sw1[2] = 3, sw1[3] = 2, sw1[10] = 0, sw1[20] = 2;
  sw2[1] = 1, sw2[2] = 1, sw2[3] = 2, sw2[10] = 1, sw2[20] = 0;
  t.lft[10] = sw1;
  t.lft[20] = sw2;
  return t;
}
std::vector<std::string> names(const Route& r) {
  std::vector<std::string> out;
  for (const auto& h : r.hops) out.push_back(h.name + ":" + std::to_string(h.in_port) + ">" + std::to_string(h.out_port));
  return out;
}
}  // namespace

TEST_CASE("SwitchInfo and LinearForwardingTable blocks decode where libibmad encodes them", "[pma]") {
  std::mt19937 rng(26);
  for (int i = 0; i < 50; ++i) {
    std::uint8_t buf[IB_SMP_DATA_SIZE] = {};
    const std::uint32_t cap = rng() & 0xffff, top = rng() & 0xffff, mcap = rng() & 0xffff, def = rng() & 0xff;
    put32(buf, IB_SW_LINEAR_FDB_CAP_F, cap);
    put32(buf, IB_SW_LINEAR_FDB_TOP_F, top);
    put32(buf, IB_SW_MCAST_FDB_CAP_F, mcap);
    put32(buf, IB_SW_DEF_PORT_F, def);
    const auto si = decode_switch_info(std::span<const std::uint8_t>(buf, sizeof buf));
    REQUIRE(si);
    CHECK(si->linear_fdb_cap == cap);
    CHECK(si->linear_fdb_top == top);
    CHECK(si->multicast_fdb_cap == mcap);
    CHECK(si->default_port == def);
  }
  std::uint8_t lft[IB_SMP_DATA_SIZE];
  for (std::size_t i = 0; i < sizeof lft; ++i) lft[i] = static_cast<std::uint8_t>(i * 7);
  const auto b = decode_lft_block(std::span<const std::uint8_t>(lft, sizeof lft));
  REQUIRE(b);
  for (std::size_t i = 0; i < kLftBlockEntries; ++i) CHECK((*b)[i] == static_cast<std::uint8_t>(i * 7));
  CHECK_FALSE(decode_lft_block(std::span<const std::uint8_t>(lft, 63)));
  CHECK_FALSE(decode_switch_info(std::span<const std::uint8_t>(lft, 8)));
}

TEST_CASE("the LFT is read in blocks up to LinearFDBTop, within its capacity and the unicast LIDs", "[pma]") {
  SwitchInfo si;
  si.linear_fdb_cap = 49152;
  si.linear_fdb_top = 0;
  CHECK(lft_blocks(si) == 1);
  si.linear_fdb_top = 63;
  CHECK(lft_blocks(si) == 1);
  si.linear_fdb_top = 64;
  CHECK(lft_blocks(si) == 2);
  si.linear_fdb_top = 10241;  // the bench fabric's highest LID
  CHECK(lft_blocks(si) == 161);
  si.linear_fdb_top = 0xFFFF;  // multicast range: no linear entries there
  CHECK(lft_blocks(si) == 768);
  si.linear_fdb_cap = 128;  // a top beyond the table's capacity: the switch has no entry there
  CHECK(lft_blocks(si) == 2);
}

TEST_CASE("a route is walked switch by switch through each table's entry for the destination LID", "[pma]") {
  const Topology topo = topology();
  const ForwardingTables t = tables();
  Route r = compute_route(topo, t, 1, 1, 3);
  REQUIRE(r.ok());
  CHECK(names(r) == std::vector<std::string>{"ca-a:0>1", "sw1:1>2", "sw2:1>2", "ca-c:1>0"});
  CHECK(route_ports(r) == std::vector<std::string>{"ca-a/1", "sw1/1", "sw1/2", "sw2/1", "sw2/2", "ca-c/1"});
  const auto cables = route_cables(r);
  REQUIRE(cables.size() == 3);
  CHECK((cables[1].from == "sw1/2" && cables[1].to == "sw2/1"));
  r = compute_route(topo, t, 1, 1, 2);  // one switch
  REQUIRE(r.ok());
  CHECK(names(r) == std::vector<std::string>{"ca-a:0>1", "sw1:1>3", "ca-b:1>0"});
  r = compute_route(topo, t, 3, 1, 20);  // to the switch it hangs off: ends at the switch
  REQUIRE(r.ok());
  CHECK(names(r) == std::vector<std::string>{"ca-c:0>1", "sw2:2>0"});
  r = compute_route(topo, t, 3, 1, 10);  // to a switch further on
  REQUIRE(r.ok());
  CHECK(names(r) == std::vector<std::string>{"ca-c:0>1", "sw2:2>1", "sw1:2>0"});
  r = compute_route(topo, t, 1, 1, 1);  // to itself: no cable
  REQUIRE(r.ok());
  CHECK(names(r) == std::vector<std::string>{"ca-a:0>0"});
  CHECK(route_cables(r).empty());
  r = compute_route(topo, t, 10, 1, 3);  // from a switch: its table picks the port
  REQUIRE(r.ok());
  CHECK(names(r) == std::vector<std::string>{"sw1:0>2", "sw2:1>2", "ca-c:1>0"});
}

TEST_CASE("a route that loops, misses an entry or leaves the topology is an error value", "[pma]") {
  const Topology topo = topology();
  ForwardingTables t = tables();
  CHECK(compute_route(topo, t, 1, 1, 99).error == RouteError::kUnknownLid);
  CHECK(compute_route(topo, t, 1, 2, 3).error == RouteError::kUnknownSource);
  CHECK(compute_route(topo, t, 77, 1, 3).error == RouteError::kUnknownSource);
  {
    ForwardingTables loop = t;
    loop.lft[20][3] = 1;  // sw2 sends LID 3 back to sw1, which sends it to sw2
    const Route r = compute_route(topo, loop, 1, 1, 3);
    CHECK(r.error == RouteError::kLoop);
    CHECK(r.detail.find("sw1") != std::string::npos);
    CHECK(names(r) == std::vector<std::string>{"ca-a:0>1", "sw1:1>2", "sw2:1>1", "sw1:2>0"});
  }
  {
    ForwardingTables hole = t;
    hole.lft[20][3] = kLftNoPort;
    const Route r = compute_route(topo, hole, 1, 1, 3);
    CHECK(r.error == RouteError::kNoEntry);
    CHECK(r.hops.size() == 3);  // the walk so far: ca-a, sw1, sw2
    hole.lft[20].resize(3);     // LID 3 beyond sw2's LinearFDBTop
    CHECK(compute_route(topo, hole, 1, 1, 3).detail.find("beyond its LinearFDBTop") != std::string::npos);
    hole.lft[10][3] = 0;  // port 0 for a LID that is not the switch's own
    CHECK(compute_route(topo, hole, 1, 1, 3).error == RouteError::kNoEntry);
  }
  {
    ForwardingTables none = t;
    none.lft.erase(20);
    CHECK(compute_route(topo, none, 1, 1, 3).error == RouteError::kNoTable);
  }
  {
    ForwardingTables dead = t;
    dead.lft[10][3] = 7;  // a port with no cable
    CHECK(compute_route(topo, dead, 1, 1, 3).error == RouteError::kDeadEnd);
    dead.lft[10][3] = 3;  // to ca-b, which does not have LID 3
    const Route r = compute_route(topo, dead, 1, 1, 3);
    CHECK(r.error == RouteError::kDeadEnd);
    CHECK(r.detail.find("ca-b") != std::string::npos);
  }
}

TEST_CASE("routes_json answers every LID of the fabric from a source, errors included", "[pma]") {
  const Topology topo = topology();
  ForwardingTables t = tables();
  t.lft[20][2] = kLftNoPort;
  const std::string all = routes_json(topo, t, 3, 0, 0);
  CHECK(all.find("\"dst_lid\":1,") != std::string::npos);
  CHECK(all.find("\"dst_lid\":20,") != std::string::npos);
  CHECK(all.find("\"error\":\"no_entry\"") != std::string::npos);
  const std::string one = routes_json(topo, t, 1, 1, 3);
  CHECK(one.find("\"dst_lid\":3,\"error\":\"\"") != std::string::npos);
  CHECK(one.find("\"name\":\"sw2\",\"in_port\":1,\"out_port\":2") != std::string::npos);
  CHECK(routes_json(topo, t, 99, 0, 3).find("unknown_source") != std::string::npos);
}

TEST_CASE("the IB feed names the one cable every lossy route crosses and no clean route does", "[pma]") {
  const Topology topo = topology();
  const ForwardingTables t = tables();
  // a->c and b->c lose; a->b is clean, and so is sw2->c (it crosses sw2/2 -> ca-c/1, the other
  // cable both lossy routes share): only sw1/2 -> sw2/1 explains both and no clean pair crosses it.
  std::vector<PairLoss> pairs = {{1, 1, 3, true, "rail0"}, {2, 1, 3, true, "rail0"}, {1, 1, 2, false, "rail0"},
                                 {20, 1, 3, false, "rail0"}};
  IbSuspects s = ib_suspects(topo, t, pairs);
  REQUIRE(s.suspects.size() == 1);
  CHECK(s.suspects[0].group == "rail0");
  CHECK(s.suspects[0].link.from == "sw1/2");
  CHECK(s.suspects[0].link.to == "sw2/1");
  CHECK(s.suspects[0].lossy_flows == 2);
  CHECK(s.suspects[0].clean_flows == 0);
  CHECK(s.unrouted.empty());
  // Without the clean sw2->c, the two shared cables tie: both kept, and never the links inside sw1.
  pairs.pop_back();
  s = ib_suspects(topo, t, pairs);
  REQUIRE(s.suspects.size() == 2);
  for (const auto& l : s.suspects) CHECK(l.link.from.substr(0, 3) != l.link.to.substr(0, 3));
  // One lossy pair: every cable of its route that no clean route crosses (a/1 -> sw1/1 is crossed by a->b).
  s = ib_suspects(topo, t, {{1, 1, 3, true, ""}, {1, 1, 2, false, ""}});
  REQUIRE(s.suspects.size() == 2);
  CHECK(s.suspects[0].link.from == "sw1/2");
  CHECK(s.suspects[1].link.from == "sw2/2");
  // A pair without a route is reported, not guessed.
  ForwardingTables hole = t;
  hole.lft[20][3] = kLftNoPort;
  s = ib_suspects(topo, hole, {{1, 1, 3, true, ""}, {2, 1, 2, false, ""}});
  CHECK(s.suspects.empty());
  REQUIRE(s.unrouted.size() == 1);
  CHECK(s.unrouted[0].find("no_entry") != std::string::npos);
  CHECK(suspects_json(s).find("\"unrouted\":[\"0x0000000000000001/1-3: no_entry") != std::string::npos);
}

TEST_CASE("pair lists parse as <GUID>/<port>-<LID> and reject anything else", "[pma]") {
  auto p = parse_pairs("0x1/1-3,0x000000000000000a/2-49151", true);
  REQUIRE(p);
  REQUIRE(p->size() == 2);
  CHECK(((*p)[0].src_guid == 1 && (*p)[0].src_port == 1 && (*p)[0].dst_lid == 3 && (*p)[0].lossy));
  CHECK(((*p)[1].src_guid == 10 && (*p)[1].dst_lid == 49151));
  CHECK(parse_pairs("", false)->empty());
  for (const char* bad : {"1/1-3", "0x1/0-3", "0x1/1-0", "0x1/1-49152", "0x1/255-3", "0x1-3/1", "0x/1-3", "0x1/1-3,",
                          "0x1/1-3x", "0x11111111111111111/1-3"})
    CHECK_FALSE(parse_pairs(bad, true));
}

// The prober's own links (sources/model/probe_links.h) routed and intersected by the pma collector:
// from ca-a (LID 1), 2 lossy flows to ca-c (LID 3) and 2 clean ones to ca-b (LID 2); the two cables
// only the lossy route crosses are named (a tie: both), the shared first cable is not; unknown
// LIDs are counted, not routed; the opt-in links list each route's cables in order.
TEST_CASE("probe links: each one's route, the unrouted counted, the suspects from the prober's verdicts", "[pma]") {
  using rdma::testing::u64;
  const Topology topo = topology();
  const ForwardingTables t = tables();
  CHECK(port_by_lid(topo, 3)->guid == 3);
  CHECK(port_by_lid(topo, 3)->port == 1);
  CHECK_FALSE(port_by_lid(topo, 10));  // a switch's LID is no probe port
  CHECK_FALSE(port_by_lid(topo, 0));
  rdma::model::IbProbeLinksView v;
  v.links = {{"mlx5_0", 1, 1, 2, "r0", 2, 0},
             {"mlx5_0", 1, 1, 3, "r0", 2, 2},
             {"mlx5_0", 1, 99, 3, "r0", 2, 2},   // the local LID is not in this fabric
             {"mlx5_0", 1, 1, 77, "r0", 1, 0}};  // nor the peer's
  v.dropped = 5;
  rdma::exporter::MetricSink out;
  write_probe_routes(topo, t, v, true, out);
  CHECK(u64(out, "rdma_pma_route_probe_links", {}) == 4u);
  CHECK(u64(out, "rdma_pma_route_probe_links_dropped", {}) == 5u);
  CHECK(u64(out, "rdma_pma_route_hops", {{"device", "mlx5_0"}, {"port", "1"}, {"dst_lid", "3"}}) == 3u);
  CHECK(u64(out, "rdma_pma_route_hops", {{"device", "mlx5_0"}, {"port", "1"}, {"dst_lid", "2"}}) == 2u);
  CHECK(rdma::testing::count(out, "rdma_pma_route_hops") == 2);
  CHECK(u64(out, "rdma_pma_route_unrouted_links", {{"error", "unknown_source"}}) == 1u);
  CHECK(u64(out, "rdma_pma_route_unrouted_links", {{"error", "unknown_lid"}}) == 1u);
  CHECK(rdma::testing::count(out, "rdma_pma_route_link") == 5);
  CHECK(u64(out, "rdma_pma_route_link",
            {{"device", "mlx5_0"}, {"port", "1"}, {"dst_lid", "3"}, {"hop", "2"}, {"from", "sw1/2"}, {"to", "sw2/1"}}) == 1u);
  CHECK(u64(out, "rdma_pma_route_link",
            {{"device", "mlx5_0"}, {"port", "1"}, {"dst_lid", "3"}, {"hop", "3"}, {"from", "sw2/2"}, {"to", "ca-c/1"}}) == 1u);
  CHECK(rdma::testing::count(out, "rdma_pma_suspect_link") == 2);
  CHECK(u64(out, "rdma_pma_suspect_link", {{"rail", "r0"}, {"from", "sw1/2"}, {"to", "sw2/1"}}) == 2u);
  CHECK(u64(out, "rdma_pma_suspect_link", {{"rail", "r0"}, {"from", "sw2/2"}, {"to", "ca-c/1"}}) == 2u);
  CHECK(u64(out, "rdma_pma_suspect_link_clean_flows", {{"rail", "r0"}, {"from", "sw1/2"}, {"to", "sw2/1"}}) == 0u);
  CHECK_FALSE(u64(out, "rdma_pma_suspect_link", {{"rail", "r0"}, {"from", "ca-a/1"}, {"to", "sw1/1"}}));  // carries clean flows

  // Default: no per-cable series; all clean: no suspect.
  for (auto& l : v.links) l.lossy_flows = 0;
  rdma::exporter::MetricSink quiet;
  write_probe_routes(topo, t, v, false, quiet);
  CHECK(rdma::testing::count(quiet, "rdma_pma_route_link") == 0);
  CHECK(rdma::testing::count(quiet, "rdma_pma_suspect_link") == 0);
  CHECK(rdma::testing::count(quiet, "rdma_pma_route_hops") == 2);
}

namespace {
// A field as NVIDIA's adb2c layouts give it: bits [lsb, lsb + width) of the big-endian dword at
// byte `dword` * 4, counted from that dword's least significant bit ("0x0.24 - 0x0.31").
void put_adb(std::uint8_t* buf, unsigned dword, unsigned lsb, unsigned width, std::uint32_t v) {
  std::uint32_t w = (std::uint32_t{buf[dword * 4]} << 24) | (std::uint32_t{buf[dword * 4 + 1]} << 16) |
                    (std::uint32_t{buf[dword * 4 + 2]} << 8) | buf[dword * 4 + 3];
  const std::uint32_t mask = (width == 32 ? 0xffffffffu : ((1u << width) - 1u)) << lsb;
  w = (w & ~mask) | ((v << lsb) & mask);
  for (int i = 0; i < 4; ++i) buf[dword * 4 + i] = static_cast<std::uint8_t>(w >> (24 - 8 * i));
}
std::optional<AdaptiveRoutingInfo> ar_of(const std::uint8_t* buf, std::size_t n = IB_SMP_DATA_SIZE) {
  return decode_adaptive_routing_info(std::span<const std::uint8_t>(buf, n));
}
}  // namespace

// The layout of ibutils2's adaptive_routing_info (packets_layouts.h), each field at the dword and
// bit its adb2c comment gives, encoded here independently of the decoder's bit offsets.
TEST_CASE("AdaptiveRoutingInfo (vendor SMP 0xFF20) decodes the fields NVIDIA's diagnostics name", "[pma]") {
  std::uint8_t buf[IB_SMP_DATA_SIZE] = {};
  // As an NVIDIA SM leaves a switch with AR on: E, ARN/FRN supported, fallback routing supported
  // and on, by SL on SL 0 and 1 only, RC left static, 2048 groups of which 17 in use.
  put_adb(buf, 0, 0, 1, 1);       // E
  put_adb(buf, 0, 1, 1, 1);       // IsARNSup
  put_adb(buf, 0, 2, 1, 1);       // IsFRNSup
  put_adb(buf, 0, 3, 1, 1);       // IsFRSup
  put_adb(buf, 0, 4, 1, 1);       // FREnabled
  put_adb(buf, 0, 8, 4, 3);       // SubGrpsActive
  put_adb(buf, 0, 16, 8, 6);      // DirectionNumSup
  put_adb(buf, 0, 26, 1, 1);      // GlbGroups
  put_adb(buf, 0, 27, 1, 1);      // BySLCap
  put_adb(buf, 0, 28, 1, 1);      // BySLEn
  put_adb(buf, 1, 0, 12, 2048 - 1);  // GroupCap (12 bits: 4095 at most)
  put_adb(buf, 1, 12, 12, 17);    // GroupTop
  put_adb(buf, 1, 24, 4, 2);      // GroupTableCap
  put_adb(buf, 2, 0, 4, 2);       // ARVersionCap
  put_adb(buf, 2, 4, 4, 1);       // RNVersionCap
  put_adb(buf, 2, 16, 16, 0x3);   // EnableBySLMask
  put_adb(buf, 3, 0, 8, 0x2);     // ByTransportDisable: RC
  put_adb(buf, 4, 0, 32, 30000000u);  // AgeingTimeValue
  auto a = ar_of(buf);
  REQUIRE(a);
  CHECK(a->enabled);
  CHECK((a->arn_supported && a->frn_supported && a->fr_supported && a->fr_enabled));
  CHECK_FALSE(a->rn_xmit_enabled);
  CHECK_FALSE(a->no_fallback);
  CHECK(a->sub_grps_active == 3);
  CHECK(a->direction_num_sup == 6);
  CHECK((a->glb_groups && a->by_sl_cap && a->by_sl_en));
  CHECK_FALSE(a->by_transport_cap);
  CHECK(a->group_cap == 2047);
  CHECK(a->group_top == 17);
  CHECK(a->group_table_cap == 2);
  CHECK(a->ar_version_cap == 2);
  CHECK(a->rn_version_cap == 1);
  CHECK(a->enable_by_sl_mask == 0x3);
  CHECK(a->by_transport_disable == 0x2);
  CHECK(a->ageing_time_us == 30000000u);
  // The same switch with AR turned off: only E changes.
  put_adb(buf, 0, 0, 1, 0);
  a = ar_of(buf);
  REQUIRE(a);
  CHECK_FALSE(a->enabled);
  CHECK(a->group_cap == 2047);
  CHECK(a->fr_enabled);
  // An all-zero answer (a switch without AR groups): disabled, GroupCap 0.
  std::uint8_t zero[IB_SMP_DATA_SIZE] = {};
  a = ar_of(zero);
  REQUIRE(a);
  CHECK_FALSE(a->enabled);
  CHECK(a->group_cap == 0);
  // Each one-bit flag of dword 0 alone sets its own field and no other.
  struct Flag {
    unsigned bit;
    bool AdaptiveRoutingInfo::*field;
  };
  const std::vector<Flag> flags = {{0, &AdaptiveRoutingInfo::enabled},         {1, &AdaptiveRoutingInfo::arn_supported},
                                   {2, &AdaptiveRoutingInfo::frn_supported},   {3, &AdaptiveRoutingInfo::fr_supported},
                                   {4, &AdaptiveRoutingInfo::fr_enabled},      {5, &AdaptiveRoutingInfo::rn_xmit_enabled},
                                   {24, &AdaptiveRoutingInfo::no_fallback},    {26, &AdaptiveRoutingInfo::glb_groups},
                                   {27, &AdaptiveRoutingInfo::by_sl_cap},      {28, &AdaptiveRoutingInfo::by_sl_en},
                                   {29, &AdaptiveRoutingInfo::by_transport_cap}};
  for (const Flag& f : flags) {
    std::uint8_t one[IB_SMP_DATA_SIZE] = {};
    put_adb(one, 0, f.bit, 1, 1);
    const auto d = ar_of(one);
    REQUIRE(d);
    for (const Flag& g : flags) CHECK((*d).*(g.field) == (&g == &f));
  }
  // 20 bytes carry the attribute; fewer are no answer.
  CHECK(ar_of(buf, kAdaptiveRoutingInfoSize));
  CHECK_FALSE(ar_of(buf, kAdaptiveRoutingInfoSize - 1));
  CHECK(kSmpAttrAdaptiveRoutingInfo == 0xFF20);
}

TEST_CASE("a route through a switch with adaptive routing on is labelled, but not on the destination's own cable",
          "[pma]") {
  const Topology topo = topology();
  ForwardingTables t = tables();
  CHECK(ar_state_name(t.ar_state(10)) == "unknown");
  for (ArState off : {ArState::kUnknown, ArState::kUnsupported, ArState::kDisabled}) {
    t.ar[10] = t.ar[20] = off;
    CHECK(compute_route(topo, t, 1, 1, 3).adaptive_hops() == 0);
  }
  t.ar[10] = ArState::kEnabled;
  t.ar[20] = ArState::kDisabled;
  Route r = compute_route(topo, t, 1, 1, 3);  // ca-a -> sw1 (AR: to sw2, a choice) -> sw2 -> ca-c
  REQUIRE(r.ok());
  CHECK(r.adaptive_hops() == 1);
  CHECK(r.hops[1].adaptive);
  CHECK_FALSE(r.hops[2].adaptive);
  r = compute_route(topo, t, 1, 1, 2);  // ca-a -> sw1 -> ca-b: sw1 hands it to the destination's own cable
  REQUIRE(r.ok());
  CHECK(r.adaptive_hops() == 0);
  r = compute_route(topo, t, 1, 1, 20);  // to a switch: the cable to it may be one of several parallel ones
  REQUIRE(r.ok());
  CHECK(r.adaptive_hops() == 1);
  t.ar[10] = ArState::kDisabled;
  t.ar[20] = ArState::kEnabled;  // the last switch before ca-c: one way to it
  CHECK(compute_route(topo, t, 1, 1, 3).adaptive_hops() == 0);
  CHECK(compute_route(topo, t, 3, 1, 1).adaptive_hops() == 1);  // the other way sw2 chooses towards sw1
  t.ar[10] = ArState::kEnabled;
  const std::string json = routes_json(topo, t, 1, 1, 3);
  CHECK(json.find("\"dst_lid\":3,\"error\":\"\",\"detail\":\"\",\"adaptive_routing\":true,\"hops\"") != std::string::npos);
  CHECK(json.find("\"name\":\"sw1\",\"in_port\":1,\"out_port\":2,\"ar_state\":\"enabled\",\"adaptive\":true") != std::string::npos);
  CHECK(json.find("\"name\":\"sw2\",\"in_port\":1,\"out_port\":2,\"ar_state\":\"enabled\",\"adaptive\":false") != std::string::npos);
  CHECK(json.find("\"name\":\"ca-c\",\"in_port\":1,\"out_port\":0,\"adaptive\":false") != std::string::npos);
}

TEST_CASE("suspects from routes that cross adaptive routing are leads, never strict", "[pma]") {
  using rdma::testing::u64;
  const Topology topo = topology();
  ForwardingTables t = tables();
  // The first IB feed case, with sw1 routing adaptively: the same cable, flagged.
  const std::vector<PairLoss> pairs = {{1, 1, 3, true, "rail0"}, {2, 1, 3, true, "rail0"}, {1, 1, 2, false, "rail0"},
                                       {20, 1, 3, false, "rail0"}, {3, 1, 2, true, "rail1"}, {3, 1, 1, false, "rail1"}};
  IbSuspects s = ib_suspects(topo, t, pairs);
  REQUIRE(s.suspects.size() == s.adaptive.size());
  for (bool a : s.adaptive) CHECK_FALSE(a);  // static routes: strict where clean_flows is 0
  t.ar[10] = ArState::kEnabled;
  s = ib_suspects(topo, t, pairs);
  REQUIRE(s.suspects.size() == s.adaptive.size());
  REQUIRE_FALSE(s.suspects.empty());
  for (std::size_t i = 0; i < s.suspects.size(); ++i) {
    // rail0's routes cross sw1 towards sw2 (a choice); rail1's (from ca-c) reach sw1 from sw2 and
    // leave it on the destination's own cable: static.
    CHECK(s.adaptive[i] == (s.suspects[i].group == "rail0"));
  }
  const auto r0 = std::find_if(s.suspects.begin(), s.suspects.end(), [](const auto& l) { return l.group == "rail0"; });
  REQUIRE(r0 != s.suspects.end());
  CHECK(r0->link.from == "sw1/2");
  CHECK(r0->clean_flows == 0);  // clean_flows 0, and still not strict
  CHECK(suspects_json(s).find("\"from\":\"sw1/2\",\"to\":\"sw2/1\",\"lossy_flows\":2,\"clean_flows\":0,\"adaptive_routing\":true") !=
        std::string::npos);

  // The prober's links: the route series and the suspects' companion say the same.
  rdma::model::IbProbeLinksView v;
  v.links = {{"mlx5_0", 1, 1, 2, "r0", 2, 0}, {"mlx5_0", 1, 1, 3, "r0", 2, 2}};
  rdma::exporter::MetricSink out;
  write_probe_routes(topo, t, v, false, out);
  CHECK(u64(out, "rdma_pma_route_adaptive_hops", {{"device", "mlx5_0"}, {"port", "1"}, {"dst_lid", "3"}}) == 1u);
  CHECK(u64(out, "rdma_pma_route_adaptive_hops", {{"device", "mlx5_0"}, {"port", "1"}, {"dst_lid", "2"}}) == 0u);
  CHECK(rdma::testing::count(out, "rdma_pma_suspect_link_adaptive_routing") == rdma::testing::count(out, "rdma_pma_suspect_link"));
  CHECK(u64(out, "rdma_pma_suspect_link_adaptive_routing", {{"rail", "r0"}, {"from", "sw1/2"}, {"to", "sw2/1"}}) == 1u);
  t.ar[10] = ArState::kUnsupported;
  rdma::exporter::MetricSink still;
  write_probe_routes(topo, t, v, false, still);
  CHECK(u64(still, "rdma_pma_suspect_link_adaptive_routing", {{"rail", "r0"}, {"from", "sw1/2"}, {"to", "sw2/1"}}) == 0u);
}
