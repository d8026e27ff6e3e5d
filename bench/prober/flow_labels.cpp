// The UDP source ports the prober's flows send from over time: the real Engine (choose_flow_label,
// rotate_flows) with a transport that connects at once and completes every probe, on a simulated
// clock, so what is printed is what a prober with these settings would put on the wire (the
// ports from the labels by the kernel's rule, flow_label_to_udp_sport). bench_coverage.py maps
// them to ECMP paths with the kernel's own route lookup.
//   bench_prober_flow_labels LINKS FLOWS SECONDS [FLOW_ROTATION_S] [SEED]
// LINKS peers of one port pair each (a link key per peer), FLOWS flows per link, FLOW_ROTATION_S
// as `flow-rotation` (default 60, the collector's 1m; 0 = never), SEED the engine's flow salt
// (default 1). The other settings are the collector's defaults (interval 1 s, jitter 10 %, the
// 50 ms wake grid). Prints one line per QP the engine creates: `link seconds sport` (link =
// peer index, seconds since the start), then `# ...` with the totals.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench/prober/sim_transport.h"
#include "collectors/prober/engine/engine.h"
#include "collectors/prober/wire/trace_packet.h"

using namespace rdma::collectors::prober;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LINKS FLOWS SECONDS [FLOW_ROTATION_S] [SEED]\n", argv[0]);
    return 2;
  }
  const int links = std::max(1, std::atoi(argv[1]));
  const int flows = std::clamp(std::atoi(argv[2]), 1, 16);
  const long seconds = std::max(1L, std::atol(argv[3]));
  const long rotation_s = argc > 4 ? std::max(0L, std::atol(argv[4])) : 60;
  const unsigned long long seed = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1;
  SimTransport t;  // rtt 0: every probe completes in its wake-up
  EngineConfig cfg;  // the collector's defaults where it matters (prober_collector.cpp)
  cfg.jitter = 0.1;
  cfg.max_peers = static_cast<std::size_t>(links);  // per-peer mode: every link probed all along
  cfg.max_links = static_cast<std::size_t>(links) * static_cast<std::size_t>(flows);
  cfg.flows = static_cast<std::uint32_t>(flows);
  cfg.flow_rotation = std::chrono::seconds(rotation_s);
  cfg.wake_grid = std::chrono::milliseconds(50);
  cfg.seed = seed ? seed : 1;
  Engine engine(cfg, t, {{"mlx5_0", 1}});
  const auto peers = sim_peers(links, "node-");
  t.now = TimePoint{} + std::chrono::hours(1);
  const TimePoint start = t.now, end = start + std::chrono::seconds(seconds);
  engine.set_peers(peers, t.now);
  std::map<std::string, int> index;
  for (int i = 0; i < links; ++i) index[peers[static_cast<std::size_t>(i)].name] = i;
  std::size_t printed = 0;
  std::vector<TransportEvent> events;
  while (t.now < end) {
    t.take_due(events);
    for (const auto& e : events) engine.handle(e);
    engine.tick(t.now);
    for (; printed < t.connects.size(); ++printed) {
      const auto& r = t.connects[printed];
      std::printf("%d %.3f %u\n", index[r.peer.name], std::chrono::duration<double>(t.now - start).count(),
                  static_cast<unsigned>(flow_label_to_udp_sport(r.flow_label)));
    }
    auto next = engine.next_deadline(t.now);
    if (!t.pending.empty()) next = std::min(next, t.pending.front().at);
    t.now += std::chrono::ceil<std::chrono::milliseconds>(std::max(next - t.now, Clock::duration(1)));
  }
  std::printf("# links=%d flows=%d seconds=%ld flow_rotation=%lds qps_created=%zu\n", links, flows, seconds, rotation_s,
              t.connects.size());
  return 0;
}
