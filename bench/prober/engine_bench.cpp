// User-space cost of the prober's loop logic (Engine + the loop's snapshot publication), with a
// fake transport and a simulated clock, on the host: no verbs, no rxe, no TCG.
//   bench_prober_engine [LINKS] [SIMULATED_SECONDS] [RTT_US] [FLOWS] [WAKE_GRID_US]
// WAKE_GRID_US: the engine's wake grid (default 50000, what the collector sets at the default 1 s
// interval; 0: a wake-up per due time). Simulates LINKS peers of FLOWS flows each (default 1), every flow at 1 probe/s, every probe completing RTT_US after its post, with
// the wake-ups of the real loop (collectors/prober/prober_collector.cpp: loop_main): one per due
// probe (its completion is handled in the same wake-up by the bounded CQ poll) and one snapshot
// per second. Prints the CPU time of the loop per simulated second, i.e. the fraction of a core
// the prober's own logic needs at that probe rate, besides the verbs calls.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/prober/sim_transport.h"
#include "collectors/prober/engine/engine.h"

using namespace rdma::collectors::prober;

namespace {
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main(int argc, char** argv) {
  const int links = argc > 1 ? std::atoi(argv[1]) : 256;
  const int seconds = argc > 2 ? std::atoi(argv[2]) : 600;
  const int rtt_us = argc > 3 ? std::atoi(argv[3]) : 5;
  const int flows = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  const int grid_us = argc > 5 ? std::max(0, std::atoi(argv[5])) : 50000;
  SimTransport t("rxe0");
  t.rtt = std::chrono::microseconds(rtt_us);
  EngineConfig cfg;
  cfg.max_peers = static_cast<std::size_t>(links);
  cfg.max_links = static_cast<std::size_t>(links) * static_cast<std::size_t>(flows);
  cfg.flows = static_cast<std::uint32_t>(flows);
  cfg.flow_rotation = std::chrono::minutes(1);
  cfg.wake_grid = std::chrono::microseconds(grid_us);
  cfg.seed = 1;
  Engine engine(cfg, t, {{"rxe0", 1}});
  const auto peers = sim_peers(links, "peer-");
  t.now = TimePoint{} + std::chrono::hours(1);
  const TimePoint start = t.now, end = start + std::chrono::seconds(seconds);
  engine.set_peers(peers, t.now);
  std::vector<TransportEvent> events;
  TimePoint last_publish{};
  std::uint64_t wakeups = 0, published = 0;
  std::shared_ptr<const Snapshot> snap;
  const double c0 = cpu_now();
  while (t.now < end) {
    ++wakeups;
    t.take_due(events);
    for (const auto& e : events) engine.handle(e);
    engine.tick(t.now);
    // The bounded CQ poll: completions due within the window are handled in this wake-up.
    while (!t.pending.empty() && t.pending.front().kind == TransportEvent::Kind::kCompletion &&
           t.pending.front().at <= t.now + std::chrono::microseconds(100)) {
      t.now = std::max(t.now, t.pending.front().at);
      engine.handle(t.pending.front());
      t.pending.pop_front();
    }
    if (t.now - last_publish >= std::chrono::seconds(1)) {
      snap = std::make_shared<const Snapshot>(engine.snapshot());
      last_publish = t.now;
      ++published;
    }
    auto next = std::min(engine.next_deadline(t.now), last_publish + std::chrono::seconds(1));
    if (!t.pending.empty()) next = std::min(next, t.pending.front().at);
    // epoll_wait has millisecond timeouts, rounded up.
    t.now += std::chrono::ceil<std::chrono::milliseconds>(std::max(next - t.now, Clock::duration(1)));
  }
  const double cpu = cpu_now() - c0;
  std::uint64_t sent = 0;
  for (const auto& p : snap->peers) sent += p.stats.sent;
  std::printf("peers=%d flows=%d simulated=%ds wakeups=%.1f/s probes=%.1f/s snapshots=%llu\n", links, flows, seconds,
              static_cast<double>(wakeups) / seconds, static_cast<double>(sent) / seconds,
              static_cast<unsigned long long>(published));
  std::printf("loop logic CPU: %.3f s for %d s = %.4f %% of a core; %.2f us per probe\n", cpu, seconds, 100 * cpu / seconds,
              1e6 * cpu / static_cast<double>(sent ? sent : 1));
  return 0;
}
