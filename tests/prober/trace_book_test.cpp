#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <variant>

#include "collectors/prober/engine/trace_book.h"
#include "tests/lib/samples.h"

using namespace rdma::collectors::prober;

namespace {
FlowOutcome flow(const std::string& peer, unsigned n, const std::string& rail = "r0") {
  FlowOutcome f;
  f.device = "rxe0";
  f.port = 1;
  f.rail = rail;
  f.peer = peer;
  f.peer_device = "rxe0";
  f.peer_port = 1;
  f.flow = n;
  f.sent = 20;
  return f;
}
}  // namespace

// The lab's shape: host h1 (10.0.1.1) -> leaf l1 -> spine a or b -> leaf l2 -> peer (10.0.2.1).
// Flows 0, 1 hash via spine a, flows 2, 3 via spine b; spine a's link to l2 drops silently.
TEST_CASE("trace_book: a drop on one path names that path's link, never a clean one", "[trace]") {
  TraceBook book;
  std::vector<FlowOutcome> window;
  for (unsigned i = 0; i < 4; ++i) window.push_back(flow("p", i));
  const std::vector<std::string> via_a{"10.0.1.254", "10.9.1.1", "10.0.2.254", "10.0.2.1"};
  const std::vector<std::string> via_b{"10.0.1.254", "10.9.2.1", "10.0.2.254", "10.0.2.1"};
  for (unsigned i = 0; i < 4; ++i) CHECK(book.record(window[i], "10.0.1.1", i < 2 ? via_a : via_b, true, false));
  CHECK(book.flows() == 4);
  // Flows 0 and 1 turn lossy; their fresh traces stop after spine a (its link to l2 drops).
  std::set<std::string> lossy{flow_id(window[0]), flow_id(window[1])};
  for (unsigned i = 0; i < 2; ++i) book.record(window[i], "10.0.1.1", {"10.0.1.254", "10.9.1.1", "*"}, false, true);
  auto suspects = rdma::model::suspect_links(book.traced(window, lossy));
  REQUIRE(suspects.size() == 1);
  CHECK(suspects[0].group == "r0");
  CHECK(suspects[0].link == rdma::model::HopLink{"10.9.1.1", "10.0.2.254"});
  CHECK(suspects[0].lossy_flows == 2);
  CHECK(suspects[0].clean_flows == 0);

  rdma::exporter::MetricSink out;
  write_suspect_metrics(suspects, book, window, out);
  const auto got = rdma::testing::u64_table(out);
  CHECK(got.at("rdma_prober_suspect_link,rail=r0,from=10.9.1.1,to=10.0.2.254") == 2);
  CHECK(got.at("rdma_prober_suspect_link_clean_flows,rail=r0,from=10.9.1.1,to=10.0.2.254") == 0);
  CHECK(got.at("rdma_prober_link_paths_seen,device=rxe0,port=1,peer=p,peer_device=rxe0,peer_port=1") == 2);
  CHECK(got.size() == 3);

  // Healed: the flows are clean again, their fresh traces are dropped: no suspect.
  for (unsigned i = 0; i < 2; ++i) book.cleared(flow_id(window[i]));
  CHECK(rdma::model::suspect_links(book.traced(window, {})).empty());
}

TEST_CASE("trace_book: rotation adds paths, forgotten flows leave, the book is bounded", "[trace]") {
  TraceBook book;
  auto f = flow("p", 0);
  book.record(f, "s", {"x", "y"}, true, false);
  book.record(f, "s", {"x", "y"}, true, false);  // the same path again
  book.record(f, "s", {"x", "z"}, true, false);
  CHECK(book.paths_seen().at(link_id(f)).size() == 2);
  book.forget(flow_id(f));
  CHECK(book.flows() == 0);
  CHECK(book.traced({f}, {}).empty());
  CHECK(book.paths_seen().at(link_id(f)).size() == 2);  // coverage outlives the flow's QP
  std::vector<std::string> long_path(100, "h");
  book.record(f, "s", long_path, false, false);
  CHECK(book.traced({f}, {})[0].path.size() == TraceBook::kMaxHops + 1);
  for (unsigned i = 0; i < TraceBook::kMaxTracedFlows + 5; ++i) book.record(flow("p", i), "s", {"x"}, false, false);
  CHECK(book.flows() == TraceBook::kMaxTracedFlows);
}

// The same shape: spine b's link to l2 drops. Flow 2 crosses it but was only just connected (too
// few probes to be judged): it is neither lossy nor clean, so it cannot clear the broken link.
// Counted clean, it would clear spine b -> l2 and leave flow 3's other links (l1 -> spine b)
// named alone: a wrong cable.
TEST_CASE("trace_book: a flow with too few probes to be judged never clears a link", "[trace]") {
  TraceBook book;
  std::vector<FlowOutcome> window;
  for (unsigned i = 0; i < 4; ++i) window.push_back(flow("p", i));
  const std::vector<std::string> via_a{"10.0.1.254", "10.9.1.1", "10.0.2.254", "10.0.2.1"};
  const std::vector<std::string> via_b{"10.0.1.254", "10.9.2.1", "10.0.2.254", "10.0.2.1"};
  // flow 2 enters spine b from another first hop (its own leaf port), so only it clears l1 -> b's
  // neighbours if it were counted clean
  const std::vector<std::string> via_b_other{"10.0.3.254", "10.9.2.1", "10.0.2.254", "10.0.2.1"};
  CHECK(book.record(window[0], "10.0.1.1", via_a, true, false));
  CHECK(book.record(window[1], "10.0.1.1", via_a, true, false));
  CHECK(book.record(window[2], "10.0.1.1", via_b_other, true, false));
  CHECK(book.record(window[3], "10.0.1.1", via_b, true, false));
  window[3].lost = 20;  // every probe of flow 3 lost
  window[2].sent = 3;   // flow 2: too few probes in the window
  window[2].lost = 3;
  LocalizeSettings ls;
  REQUIRE_FALSE(flow_judged(window[2], ls));
  Finding path;
  path.rail = "r0";
  path.path = true;
  const auto input = window_traced_flows(window, {path}, book, ls);
  REQUIRE(input.size() == 3);  // flows 0, 1 clean, 3 lossy; flow 2 left out
  for (const auto& t : input) CHECK(t.id != flow_id(window[2]));
  auto suspects = rdma::model::suspect_links(input);
  std::set<std::pair<std::string, std::string>> named;
  for (const auto& s : suspects) named.insert({s.link.from, s.link.to});
  CHECK(named.count({"10.9.2.1", "10.0.2.254"}) == 1);  // the broken link stays in question
  for (const auto& s : suspects) {
    CHECK(s.clean_flows == 0);
    REQUIRE(s.lossy_ids.size() == 1);
    CHECK(s.lossy_ids[0] == flow_id(window[3]));
  }
  // A rail whose verdict is not path names nothing, whatever its flows.
  Finding none;
  none.rail = "r0";
  CHECK(window_traced_flows(window, {none}, book, ls).empty());
}
