// The board the prober publishes its InfiniBand links into and the pma collector reads
// (sources/model/probe_links.h): one window replaces the last, flows of one link are summed,
// links without a LID are left out, the bound drops (and counts) the rest, a stale or cleared
// board reads empty, and readers on other threads see whole windows only.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "sources/model/probe_links.h"

using rdma::model::IbProbeLink;
using rdma::model::IbProbeLinkBoard;
using namespace std::chrono_literals;

namespace {
IbProbeLink flow(const char* dev, std::uint16_t dst, bool lossy, std::string rail = "0") {
  return {dev, 1, 7, dst, std::move(rail), 1, lossy ? 1u : 0u};
}
}  // namespace

TEST_CASE("probe link board: a window replaces the last, flows of one link are summed, no LID is left out",
          "[model]") {
  IbProbeLinkBoard b;
  const auto t0 = IbProbeLinkBoard::Clock::now();
  CHECK(b.view(t0)->links.empty());
  b.publish({flow("mlx5_0", 9, true), flow("mlx5_0", 3, false), flow("mlx5_0", 9, false), flow("mlx5_0", 0, true)}, 90s, t0);
  auto v = b.view(t0);
  REQUIRE(v->links.size() == 2);
  CHECK(v->links[0].dst_lid == 3);  // sorted by (device, port, dst_lid)
  CHECK(v->links[1].dst_lid == 9);
  CHECK(v->links[1].judged_flows == 2);
  CHECK(v->links[1].lossy_flows == 1);
  CHECK(v->dropped == 0);
  b.publish({flow("mlx5_1", 4, false)}, 90s, t0);
  v = b.view(t0);
  REQUIRE(v->links.size() == 1);
  CHECK(v->links[0].device == "mlx5_1");
}

TEST_CASE("probe link board: bounded, stale after its period, empty once cleared", "[model]") {
  IbProbeLinkBoard b;
  const auto t0 = IbProbeLinkBoard::Clock::now();
  std::vector<IbProbeLink> many;
  for (std::size_t i = 0; i < IbProbeLinkBoard::kMaxLinks + 10; ++i)
    many.push_back({"mlx5_" + std::to_string(i / 40000), 1, 7, static_cast<std::uint16_t>(1 + i % 40000), "", 1, 0});
  b.publish(std::move(many), 90s, t0);
  CHECK(b.view(t0)->links.size() == IbProbeLinkBoard::kMaxLinks);
  CHECK(b.view(t0)->dropped == 10);
  CHECK(b.view(t0 + 89s)->links.size() == IbProbeLinkBoard::kMaxLinks);
  CHECK(b.view(t0 + 90s)->links.empty());  // the prober stopped publishing: not the fabric's state
  b.publish({flow("mlx5_0", 9, true)}, 90s, t0);
  b.clear();
  CHECK(b.view(t0)->links.empty());
}

TEST_CASE("probe link board: readers see whole windows while the prober publishes", "[model]") {
  IbProbeLinkBoard b;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint16_t w = 1; w <= 500; ++w) {
      std::vector<IbProbeLink> window;
      for (std::uint16_t l = 1; l <= 8; ++l) window.push_back({"mlx5_0", 1, 7, l, "", w, 0});
      b.publish(std::move(window), 1h);
    }
    done = true;
  });
  std::size_t seen = 0;
  while (!done) {
    auto v = b.view();
    if (v->links.empty()) continue;
    ++seen;
    REQUIRE(v->links.size() == 8);
    for (const auto& l : v->links) REQUIRE(l.judged_flows == v->links.front().judged_flows);  // one window's
  }
  writer.join();
  CHECK(b.view()->links.front().judged_flows == 500);
  (void)seen;
}
