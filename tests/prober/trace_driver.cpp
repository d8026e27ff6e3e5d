// The real path tracer and its scheduler, driven from the command line for netns_tracer.sh: one
// trace per UDP source port, all of them through one TraceScheduler (its thread, its token
// buckets, one per local port; --locals K spreads the traces over K local ports of the same
// netdev, as a node with K ports), as the prober runs them. Prints one line per trace:
//   sport=49153 result=complete packets=3 answers=3 seconds=0.0021 start=0.0100 binding=bindtodevice ignored=- hops=10.0.1.1,10.0.2.2,10.0.9.2
// (start: seconds from the first request; ignored: reason:count,... of the answers not taken)
// and a last line: total traces=N packets=P answers=A seconds=S max_in_flight=M.
#include <net/if.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectors/prober/engine/trace_scheduler.h"
#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/wire/path_tracer.h"

using namespace rdma::collectors::prober;

namespace {

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: trace_driver --source ADDR --dest ADDR [--dev NETDEV] --sports FIRST:COUNT [--tos N] [--qpn N]\n"
               "                    [--rate N] [--burst N] [--max-hops N] [--timeout-ms N] [--workers N] [--locals N]\n"
               "                    [--per-port N] [--start-ms N] [--start-burst N]\n");
  std::exit(2);
}

long number(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 0);
  if (!end || *end) usage();
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string source, dest, dev;
  TraceSchedulerConfig defaults;
  long first = -1, count = 1, tos = 0, qpn = 0x11, rate = 10, burst = 10, hops = 8, timeout_ms = 250,
       workers = defaults.workers, per_port = defaults.per_port, start_ms = defaults.start_interval.count(),
       start_burst = static_cast<long>(defaults.start_burst), locals = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--source") source = v;
    else if (k == "--dest") dest = v;
    else if (k == "--dev") dev = v;
    else if (k == "--sports") {
      const char* colon = std::strchr(v, ':');
      if (!colon) usage();
      first = number(std::string(v, colon).c_str());
      count = number(colon + 1);
    } else if (k == "--tos") tos = number(v);
    else if (k == "--qpn") qpn = number(v);
    else if (k == "--rate") rate = number(v);
    else if (k == "--burst") burst = number(v);
    else if (k == "--max-hops") hops = number(v);
    else if (k == "--timeout-ms") timeout_ms = number(v);
    else if (k == "--workers") workers = number(v);
    else if (k == "--locals") locals = number(v);
    else if (k == "--per-port") per_port = number(v);
    else if (k == "--start-ms") start_ms = number(v);
    else if (k == "--start-burst") start_burst = number(v);
    else usage();
  }
  const auto src = address_gid(source), dst = address_gid(dest);
  if (!src || !dst || first < 1 || first > 65535 || count < 1 || first + count > 65536 || workers < 1 || locals < 1 ||
      per_port < 1 || start_ms < 0 || start_burst < 1)
    usage();
  unsigned ifindex = 0;
  if (!dev.empty() && !(ifindex = if_nametoindex(dev.c_str()))) {
    std::fprintf(stderr, "trace_driver: no netdev %s\n", dev.c_str());
    return 2;
  }
  SocketPathTracer tracer;
  TraceScheduler sched({.rate = static_cast<double>(rate),
                        .burst = static_cast<double>(burst),
                        .max_queued = 65536,
                        .workers = static_cast<unsigned>(workers),
                        .per_port = static_cast<unsigned>(per_port),
                        .start_interval = std::chrono::milliseconds(start_ms),
                        .start_burst = static_cast<double>(start_burst)},
                       tracer);
  const auto t0 = std::chrono::steady_clock::now();
  sched.start();
  for (long i = 0; i < count; ++i) {
    TraceJob j;
    j.link = static_cast<std::uint64_t>(i + 1);
    j.local = dev + "/" + std::to_string(i % locals);
    j.target.source = *src;
    j.target.dest = *dst;
    j.target.ifindex = ifindex;
    j.target.sport = static_cast<std::uint16_t>(first + i);
    j.target.dest_qpn = static_cast<std::uint32_t>(qpn);
    j.target.tos = static_cast<std::uint8_t>(tos);
    j.options.max_hops = static_cast<unsigned>(hops);
    j.options.hop_timeout = std::chrono::milliseconds(timeout_ms);
    sched.request(std::move(j));
  }
  long done = 0;
  std::vector<std::pair<double, double>> spans;  // each trace's start and end, seconds from t0
  // A guard only: every trace ends within max_hops hop timeouts plus its pacing.
  const auto guard = t0 + std::chrono::seconds(30) + count * (hops * std::chrono::milliseconds(timeout_ms) +
                                                                std::chrono::milliseconds(1000 * hops / std::max(1L, rate)));
  while (done < count && std::chrono::steady_clock::now() < guard) {
    for (const auto& d : sched.take_results()) {
      ++done;
      std::string h;
      for (const auto& x : d.outcome.hops) h += (h.empty() ? "" : ",") + x;
      const auto& o = d.outcome;
      std::string ignored;
      for (const auto& [reason, n] : o.ignored) ignored += (ignored.empty() ? "" : ",") + reason + ":" + std::to_string(n);
      const double start = std::chrono::duration<double>(d.started - t0).count();
      spans.emplace_back(start, start + d.seconds);
      std::printf("sport=%u result=%s packets=%llu answers=%llu seconds=%.4f start=%.4f binding=%s ignored=%s hops=%s\n",
                  d.job.target.sport, !o.failure.empty() ? o.failure.c_str() : o.complete ? "complete" : "partial",
                  static_cast<unsigned long long>(o.packets), static_cast<unsigned long long>(o.answers), d.seconds, start,
                  o.device_binding.empty() ? "-" : o.device_binding.c_str(), ignored.empty() ? "-" : ignored.c_str(),
                  h.c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  sched.stop();
  const auto c = sched.counters();
  // The most traces in flight at once: a sweep over the starts and ends.
  std::vector<std::pair<double, int>> edges;
  for (const auto& [a, b] : spans) edges.emplace_back(a, 1), edges.emplace_back(b, -1);
  std::sort(edges.begin(), edges.end(), [](const auto& x, const auto& y) { return x.first != y.first ? x.first < y.first : x.second < y.second; });
  int in_flight = 0, max_in_flight = 0;
  for (const auto& e : edges) max_in_flight = std::max(max_in_flight, in_flight += e.second);
  std::printf("total traces=%ld packets=%llu answers=%llu seconds=%.6f max_in_flight=%d\n", done,
              static_cast<unsigned long long>(c.packets), static_cast<unsigned long long>(c.answers),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), max_in_flight);
  return done == count ? 0 : 1;
}
