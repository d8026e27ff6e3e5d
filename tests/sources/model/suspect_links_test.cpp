#include <catch2/catch.hpp>

#include "sources/model/suspect_links.h"

using rdma::model::HopLink;
using rdma::model::path_links;
using rdma::model::suspect_links;
using rdma::model::SuspectLink;
using rdma::model::SuspectSettings;
using rdma::model::TracedFlow;

namespace {

// A two-tier fabric as a tracer sees it: source S, leaf L, spines X/Y/Z, leaf R, destination D.
TracedFlow flow(const std::string& id, bool lossy, std::vector<std::string> path, std::string group = "1") {
  TracedFlow f;
  f.group = std::move(group);
  f.id = id;
  f.lossy = lossy;
  f.path = std::move(path);
  return f;
}

std::vector<HopLink> links_of(const std::vector<SuspectLink>& s) {
  std::vector<HopLink> out;
  for (auto& x : s) out.push_back(x.link);
  return out;
}

const std::vector<std::string> kViaX{"S", "L", "X", "R", "D"};
const std::vector<std::string> kViaY{"S", "L", "Y", "R", "D"};
const std::vector<std::string> kViaZ{"S", "L", "Z", "R", "D"};

}  // namespace

TEST_CASE("path links skip unanswered hops and repeats") {
  CHECK(path_links({"S", "L", "*", "R", "D"}) == std::vector<HopLink>{{"S", "L"}, {"R", "D"}});
  CHECK(path_links({"S", "S", "L", "S", "L"}) == std::vector<HopLink>{{"S", "L"}, {"L", "S"}});
  CHECK(path_links({}).empty());
  CHECK(path_links({"S"}).empty());
}

TEST_CASE("one dropped spine path: the links only its flows cross, tied") {
  auto s = suspect_links({flow("a", true, kViaX), flow("b", true, kViaX), flow("c", false, kViaY),
                          flow("d", false, kViaY)});
  REQUIRE(s.size() == 2);
  CHECK(links_of(s) == std::vector<HopLink>{{"L", "X"}, {"X", "R"}});
  for (auto& x : s) {
    CHECK(x.group == "1");
    CHECK(x.lossy_flows == 2);
    CHECK(x.clean_flows == 0);
    CHECK_FALSE(x.narrowed);
  }
}

TEST_CASE("a fresh trace that stops names the link after its last answered hop") {
  auto lossy = flow("a", true, kViaX);
  lossy.fresh_path = {"S", "L", "X", "*", "*"};
  auto s = suspect_links({lossy, flow("c", false, kViaY)});
  REQUIRE(s.size() == 1);
  CHECK(s[0].link == HopLink{"X", "R"});
  CHECK(s[0].narrowed);
  CHECK(s[0].lossy_flows == 1);
}

TEST_CASE("a lossy flow whose fresh trace passes names nothing: its own direction carries its packets") {
  // Without a fresh trace, X's links would be named (the intersection: no clean flow crosses them).
  auto lossy = flow("a", true, kViaX);
  REQUIRE(links_of(suspect_links({lossy, flow("c", false, kViaY)})) == std::vector<HopLink>{{"L", "X"}, {"X", "R"}});
  SECTION("it reached the destination") {
    lossy.fresh_path = kViaX;
    lossy.fresh_complete = true;
    CHECK(suspect_links({lossy, flow("c", false, kViaY)}).empty());
  }
  SECTION("a silent destination: it answered as far as the clean trace did") {
    lossy.path = {"S", "L", "X", "R", "*", "*"};
    lossy.fresh_path = {"S", "L", "X", "R", "*", "*"};
    CHECK(suspect_links({lossy, flow("c", false, kViaY)}).empty());
  }
  SECTION("a hop that did not answer this time, with a later one that did") {
    lossy.fresh_path = {"S", "L", "*", "R", "D"};
    CHECK(suspect_links({lossy, flow("c", false, kViaY)}).empty());
  }
  SECTION("short of the clean trace it still narrows") {
    lossy.fresh_path = {"S", "L", "X", "*", "*"};
    auto s = suspect_links({lossy, flow("c", false, kViaY)});
    REQUIRE(links_of(s) == std::vector<HopLink>{{"X", "R"}});
    CHECK(s[0].narrowed);
  }
}

TEST_CASE("a return-direction drop seen from the probing side: no forward link is named") {
  // The answers of a and b come back over a dropped link; their forward paths (via X and Y) are
  // their own, crossed by no clean flow, so the intersection alone would name L->X, X->R, L->Y
  // and Y->R -- four cables that pass every packet. Their fresh traces pass: nothing is named.
  auto a = flow("a", true, kViaX), b = flow("b", true, kViaY);
  a.fresh_path = kViaX;
  a.fresh_complete = true;
  b.fresh_path = {"S", "L", "Y", "R", "*"};  // the destination silent this time, R answered as before
  b.path = {"S", "L", "Y", "R", "*"};
  CHECK(suspect_links({a, b, flow("c", false, kViaZ)}).empty());
  // A third lossy flow whose fresh trace stops before X->R is the only evidence left: X->R alone.
  auto d = flow("d", true, kViaX);
  d.fresh_path = {"S", "L", "X", "*", "*"};
  CHECK(links_of(suspect_links({a, b, d, flow("c", false, kViaZ)})) == std::vector<HopLink>{{"X", "R"}});
}

TEST_CASE("two of three paths dropped: both named, the clean one never") {
  auto x = flow("x", true, kViaX);
  x.fresh_path = {"S", "L", "X"};
  auto y = flow("y", true, kViaY);
  y.fresh_path = {"S", "L", "Y", "*"};
  auto s = suspect_links({x, y, flow("z", false, kViaZ)});
  CHECK(links_of(s) == std::vector<HopLink>{{"X", "R"}, {"Y", "R"}});
  for (auto& l : links_of(s)) CHECK(l.from != "Z");
}

TEST_CASE("a link clean flows cross is never a suspect, even when a fresh trace stops before it") {
  // The stop at L is an ICMP rate limit, not the drop: L->X carries clean flow b.
  auto lossy = flow("a", true, kViaX);
  lossy.fresh_path = {"S", "L", "*", "*"};
  auto clean_x = flow("b", false, {"S", "L", "X", "Q"});
  auto s = suspect_links({lossy, clean_x, flow("c", false, kViaY)});
  REQUIRE(s.size() == 1);
  CHECK(s[0].link == HopLink{"X", "R"});
  CHECK_FALSE(s[0].narrowed);
}

TEST_CASE("unanswered hops: a lossy flow whose only own links are hidden names nothing") {
  auto s = suspect_links({flow("a", true, {"S", "L", "*", "R", "D"}), flow("c", false, kViaY)});
  CHECK(s.empty());
}

TEST_CASE("one lossy flow among many clean ones is enough") {
  std::vector<TracedFlow> flows{flow("a", true, kViaX)};
  for (int i = 0; i < 7; ++i) flows.push_back(flow("c" + std::to_string(i), false, i % 2 ? kViaY : kViaZ));
  CHECK(links_of(suspect_links(flows)) == std::vector<HopLink>{{"L", "X"}, {"X", "R"}});
}

TEST_CASE("a flow that changed path is blamed on neither path") {
  // Its fresh trace went via W (a re-hash after a routing change): that is a new path, not the
  // old one cut short. The links it answered across passed its packets, what lies after its stop
  // is unknown, and the old path's links are not its: nothing is named.
  auto moved = flow("a", true, kViaX);
  moved.fresh_path = {"S", "L", "W"};
  CHECK(suspect_links({moved, flow("c", false, kViaY)}).empty());
  // Complete on the new path: that path passed its packets, and the old path is not its own.
  moved.fresh_path = {"S", "L", "W", "R", "D"};
  moved.fresh_complete = true;
  CHECK(suspect_links({moved, flow("c", false, kViaY)}).empty());
}

TEST_CASE("a path that grew by a hop: the fresh trace is a new path, no link of the old one is named") {
  // Clean, the flow went S L R D. The path grew (L X R D); the drop is after R. Its fresh trace
  // stops after R: read on the old path it would name R -> D (R is there, D after it); position
  // by position it differs (X where R was), so it names nothing.
  auto grown = flow("a", true, {"S", "L", "R", "D"});
  grown.fresh_path = {"S", "L", "X", "R", "*", "*"};
  CHECK(suspect_links({grown, flow("c", false, {"S", "L", "Q", "D"})}).empty());
  // A fresh trace that is the old path cut short still narrows.
  grown.fresh_path = {"S", "L", "*", "*"};
  auto s = suspect_links({grown, flow("c", false, {"S", "L", "Q", "D"})});
  REQUIRE(links_of(s) == std::vector<HopLink>{{"L", "R"}});
  CHECK(s[0].narrowed);
}

TEST_CASE("the greedy cover prefers the link that explains most lossy flows") {
  // Three lossy flows through spine X, one of them from a second leaf M: X->R explains all three,
  // L->X only two, M->X one, so X->R is named alone.
  auto s = suspect_links({flow("a", true, kViaX), flow("b", true, kViaX), flow("c", true, {"S", "M", "X", "R", "D"}),
                          flow("d", false, kViaY), flow("e", false, {"S", "M", "Y", "R", "D"})});
  REQUIRE(links_of(s) == std::vector<HopLink>{{"X", "R"}});
  CHECK(s[0].lossy_flows == 3);
}

TEST_CASE("suspects stay inside their group and under the bound") {
  auto s = suspect_links({flow("a", true, kViaX, "1"), flow("b", false, kViaX, "2"), flow("c", false, kViaY, "1")});
  REQUIRE(s.size() == 2);
  for (auto& x : s) CHECK(x.group == "1");

  std::vector<TracedFlow> wide;
  for (int i = 0; i < 10; ++i)
    wide.push_back(flow("l" + std::to_string(i), true, {"S", "L", "X" + std::to_string(i), "R", "D"}));
  wide.push_back(flow("c", false, kViaY));
  CHECK(suspect_links(wide, SuspectSettings{3}).size() == 3);
  CHECK(suspect_links(wide).size() == 4);
}

TEST_CASE("no lossy flow, no suspect") {
  CHECK(suspect_links({flow("a", false, kViaX), flow("b", false, kViaY)}).empty());
  CHECK(suspect_links({}).empty());
}
