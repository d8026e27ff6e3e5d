#include <catch2/catch.hpp>

#include <map>
#include <variant>

#include "collectors/prober/engine/localize.h"
#include "tests/lib/samples.h"

using namespace rdma::collectors::prober;

namespace {

// `n` flows of one link, each with `sent` probes; the first `lossy` of them lose `lost` each.
void link(std::vector<FlowOutcome>& out, const std::string& device, const std::string& rail, const std::string& peer,
          unsigned n, unsigned lossy = 0, std::uint64_t sent = 20, std::uint64_t lost = 20, bool up = true) {
  for (unsigned i = 0; i < n; ++i) {
    FlowOutcome f;
    f.device = device;
    f.port = 1;
    f.rail = rail;
    f.peer = peer;
    f.peer_device = device == "rxeA1" ? "rxeB1" : "rxeB2";
    f.peer_port = 1;
    f.flow = i;
    f.sent = up ? sent : 0;
    f.lost = up && i < lossy ? lost : 0;
    f.local_port_up = up;
    out.push_back(f);
  }
}

const Finding& rail(const std::vector<Finding>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.rail == name) return f;
  FAIL("no finding for rail " << name);
  throw;
}

std::vector<std::string> v(std::initializer_list<std::string> l) { return l; }

}  // namespace

TEST_CASE("localize: clean flows on every rail are verdict none", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4);
  link(flows, "rxeA2", "2", "B", 4);
  auto fs = localize(flows, {});
  REQUIRE(fs.size() == 2);
  CHECK(fs[0].rail == "1");
  CHECK(fs[1].rail == "2");
  for (const auto& f : fs) {
    CHECK(f.verdict == Verdict::kNone);
    CHECK_FALSE((f.local_port || f.peer || f.path));
    CHECK(f.judged == 4);
    CHECK(f.lossy == 0);
  }
}

TEST_CASE("localize: a subset of flows lossy towards two peers of a rail is a path", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 2);
  link(flows, "rxeA1", "1", "C", 4, 1);
  link(flows, "rxeA1", "1", "D", 4);
  link(flows, "rxeA2", "2", "B", 4);
  link(flows, "rxeA2", "2", "C", 4);
  auto fs = localize(flows, {});
  CHECK(rail(fs, "1").verdict == Verdict::kPath);
  CHECK(rail(fs, "1").lossy == 3);
  CHECK(rail(fs, "1").peers.empty());
  CHECK(rail(fs, "2").verdict == Verdict::kNone);
}

TEST_CASE("localize: one peer's flows partly lossy is not a path while the rail has other peers", "[localize]") {
  // One peer alone cannot tell a path from something of that peer; path_min_peers = 2 by default.
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 2);
  link(flows, "rxeA1", "1", "C", 4);
  link(flows, "rxeA1", "1", "D", 4);
  CHECK(localize(flows, {}).at(0).verdict == Verdict::kNone);
  LocalizeSettings one;
  one.path_min_peers = 1;
  CHECK(localize(flows, one).at(0).verdict == Verdict::kPath);
}

TEST_CASE("localize: on a rail with one peer, a subset of its flows lossy is a path", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 2);
  link(flows, "rxeA2", "2", "B", 4);
  auto fs = localize(flows, {});
  CHECK(rail(fs, "1").verdict == Verdict::kPath);
  CHECK(rail(fs, "1").path);
  CHECK_FALSE(rail(fs, "1").peer);
  CHECK(rail(fs, "2").verdict == Verdict::kNone);
}

TEST_CASE("localize: every flow to one peer lost while the rail's other peers are fine is that peer", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4);
  link(flows, "rxeA1", "1", "C", 4);
  link(flows, "rxeA1", "1", "D", 4);
  auto f = localize(flows, {}).at(0);
  CHECK(f.verdict == Verdict::kPeer);
  CHECK(f.peers == v({"B"}));
  CHECK(f.local_ports.empty());
  CHECK_FALSE(f.path);
}

TEST_CASE("localize: a stopped peer, the only one, is verdict peer on every rail", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4);
  link(flows, "rxeA2", "2", "B", 4, 4);
  for (const auto& f : localize(flows, {})) {
    CHECK(f.verdict == Verdict::kPeer);
    CHECK(f.peers == v({"B"}));
    CHECK(f.local_ports.empty());
  }
}

TEST_CASE("localize: a local port that is down is local_port on its rail, never its peers' fault", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 0, 0, 0, /*up=*/false);
  link(flows, "rxeA1", "1", "C", 4, 0, 0, 0, /*up=*/false);
  link(flows, "rxeA2", "2", "B", 4);
  link(flows, "rxeA2", "2", "C", 4);
  auto fs = localize(flows, {});
  CHECK(rail(fs, "1").verdict == Verdict::kLocalPort);
  CHECK(rail(fs, "1").local_ports == v({"rxeA1/1"}));
  CHECK(rail(fs, "1").peers.empty());
  CHECK(rail(fs, "1").judged == 0);
  CHECK(rail(fs, "2").verdict == Verdict::kNone);
}

TEST_CASE("localize: a local port losing to every peer while the other ports do not is local_port", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4);
  link(flows, "rxeA1", "1", "C", 4, 4);
  link(flows, "rxeA2", "2", "B", 4);
  link(flows, "rxeA2", "2", "C", 4);
  auto fs = localize(flows, {});
  CHECK(rail(fs, "1").verdict == Verdict::kLocalPort);
  CHECK(rail(fs, "1").local_ports == v({"rxeA1/1"}));
  CHECK(rail(fs, "1").peers.empty());  // explained by the port, not blamed on B and C
  CHECK(rail(fs, "2").verdict == Verdict::kNone);
}

TEST_CASE("localize: ambiguous, one peer on the rail and every flow lost with the local port up is peer", "[localize]") {
  // Our port on rail 1 or the peer's: the same picture from here. The weaker claim is made; the
  // peer's own prober (or a port state it reads as down) says which end.
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4);
  link(flows, "rxeA2", "2", "B", 4);
  auto fs = localize(flows, {});
  CHECK(rail(fs, "1").verdict == Verdict::kPeer);
  CHECK(rail(fs, "1").local_ports.empty());
  CHECK(rail(fs, "2").verdict == Verdict::kNone);
}

TEST_CASE("localize: without rail labels, each local port's peers are its rail for a path", "[localize]") {
  // One rail label ("") for ports that each reach their own peer: path is judged per local port.
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "", "B1", 8, 3);
  link(flows, "rxeA2", "", "B2", 8);
  auto f = localize(flows, {}).at(0);
  CHECK(f.verdict == Verdict::kPath);
  CHECK(f.local_ports.empty());
  CHECK(f.peers.empty());
}

TEST_CASE("localize: a local port losing its only peer, which another port of the rail reaches, is local_port",
          "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4);
  link(flows, "rxeA2", "1", "B", 4);
  auto f = localize(flows, {}).at(0);
  CHECK(f.verdict == Verdict::kLocalPort);
  CHECK(f.local_ports == v({"rxeA1/1"}));
  CHECK(f.peers.empty());
  CHECK_FALSE(f.path);  // rxeA1's flows are explained by the port
}

TEST_CASE("localize: without rail labels, one peer stopped and a port down", "[localize]") {
  std::vector<FlowOutcome> stopped;
  link(stopped, "rxeA1", "", "B1", 4, 4);
  link(stopped, "rxeA2", "", "B2", 4, 4);
  auto f = localize(stopped, {}).at(0);
  CHECK(f.verdict == Verdict::kPeer);
  CHECK(f.peers == v({"B1", "B2"}));
  std::vector<FlowOutcome> port_down;
  link(port_down, "rxeA1", "", "B1", 4, 0, 0, 0, /*up=*/false);
  link(port_down, "rxeA2", "", "B2", 4);
  f = localize(port_down, {}).at(0);
  CHECK(f.verdict == Verdict::kLocalPort);
  CHECK(f.local_ports == v({"rxeA1/1"}));
  CHECK_FALSE((f.peer || f.path));
}

TEST_CASE("localize: a rail can hold a dead peer and a lossy path at once", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4);
  link(flows, "rxeA1", "1", "C", 4, 1);
  link(flows, "rxeA1", "1", "D", 4, 2);
  link(flows, "rxeA1", "1", "E", 4);
  auto f = localize(flows, {}).at(0);
  CHECK(f.verdict == Verdict::kPeer);  // the first that holds
  CHECK(f.peer);
  CHECK(f.path);
  CHECK(f.peers == v({"B"}));
}

TEST_CASE("localize: background loss is no fault, a flow needs min_lost and loss_ratio", "[localize]") {
  std::vector<FlowOutcome> flows;
  SECTION("1 in 1e4") { link(flows, "rxeA1", "1", "B", 4, 2, 10000, 1); }
  SECTION("30 in 1e4: over min_lost, under loss_ratio") { link(flows, "rxeA1", "1", "B", 4, 4, 10000, 30); }
  SECTION("one probe of a short window") { link(flows, "rxeA1", "1", "B", 4, 2, 10, 1); }
  SECTION("two probes: under min_lost") { link(flows, "rxeA1", "1", "B", 4, 2, 10, 2); }
  link(flows, "rxeA2", "2", "B", 4);
  for (const auto& f : localize(flows, {})) {
    CHECK(f.verdict == Verdict::kNone);
    CHECK(f.lossy == 0);
  }
}

TEST_CASE("localize: lossy at min_lost and loss_ratio exactly", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 2, 60, 3);  // 3 of 60 = 0.05
  CHECK(localize(flows, {}).at(0).verdict == Verdict::kPath);
}

TEST_CASE("localize: flows with fewer than min_probes probes are not judged", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 4, 9, 9);  // every probe lost, but only 9
  link(flows, "rxeA2", "2", "B", 4);
  auto fs = localize(flows, {});
  CHECK(rail(fs, "1").verdict == Verdict::kNone);
  CHECK(rail(fs, "1").judged == 0);
  CHECK(rail(fs, "1").flows == 4);
  LocalizeSettings s;
  s.min_probes = 9;
  CHECK(rail(localize(flows, s), "1").verdict == Verdict::kPeer);
}

TEST_CASE("localize: metrics, four verdict series per rail, the blamed, and per link the lossy flows", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "1", "B", 4, 2);
  link(flows, "rxeA2", "2", "B", 4, 0, 0, 0, /*up=*/false);
  const LocalizeSettings s;
  rdma::exporter::MetricSink out;
  write_localization_metrics(localize(flows, s), flows, s, out);

  const auto got = rdma::testing::u64_table(out);
  const std::map<std::string, std::uint64_t> want{
      {"rdma_prober_verdict,rail=1,verdict=none", 0},
      {"rdma_prober_verdict,rail=1,verdict=local_port", 0},
      {"rdma_prober_verdict,rail=1,verdict=peer", 0},
      {"rdma_prober_verdict,rail=1,verdict=path", 1},
      {"rdma_prober_verdict,rail=2,verdict=none", 0},
      {"rdma_prober_verdict,rail=2,verdict=local_port", 1},
      {"rdma_prober_verdict,rail=2,verdict=peer", 0},
      {"rdma_prober_verdict,rail=2,verdict=path", 0},
      {"rdma_prober_blamed,rail=2,verdict=local_port,subject=rxeA2/1", 1},
      {"rdma_prober_link_flows_judged,device=rxeA1,port=1,peer=B,peer_device=rxeB1,peer_port=1", 4},
      {"rdma_prober_link_flows_lossy,device=rxeA1,port=1,peer=B,peer_device=rxeB1,peer_port=1", 2},
      {"rdma_prober_link_flows_judged,device=rxeA2,port=1,peer=B,peer_device=rxeB2,peer_port=1", 0},
      {"rdma_prober_link_flows_lossy,device=rxeA2,port=1,peer=B,peer_device=rxeB2,peer_port=1", 0},
  };
  CHECK(got == want);
}

TEST_CASE("localize: no flows, no findings and no series", "[localize]") {
  CHECK(localize({}, {}).empty());
  rdma::exporter::MetricSink out;
  write_localization_metrics({}, {}, {}, out);
  CHECK(out.families().empty());
}

TEST_CASE("localize: the InfiniBand links of a window, each flow judged and lossy by the same rule", "[localize]") {
  std::vector<FlowOutcome> flows;
  link(flows, "rxeA1", "r0", "b", 3, 1);                  // RoCE: no LID, not published
  link(flows, "mlx5_0", "r0", "c", 2, 1);                 // one lossy flow of two
  link(flows, "mlx5_0", "r0", "d", 1, 0, 5);              // too few probes to judge
  for (std::size_t i = 3; i < flows.size(); ++i) flows[i].src_lid = 7, flows[i].peer_lid = i < 5 ? 12 : 13;
  const auto links = window_ib_links(flows, LocalizeSettings{});
  REQUIRE(links.size() == 3);  // one entry per flow: the board sums them per link
  CHECK(links[0].dst_lid == 12);
  CHECK(links[0].src_lid == 7);
  CHECK(links[0].judged_flows == 1);
  CHECK(links[0].lossy_flows == 1);
  CHECK(links[1].lossy_flows == 0);
  CHECK(links[2].dst_lid == 13);
  CHECK(links[2].judged_flows == 0);
  rdma::model::IbProbeLinkBoard board;
  board.publish(links, std::chrono::hours(1));
  const auto v = board.view();
  REQUIRE(v->links.size() == 2);
  CHECK(v->links[0].judged_flows == 2);
  CHECK(v->links[0].lossy_flows == 1);
}
