// The fleet simulator's table (fleet_sim.h): per fault kind and design, over TRIALS seeds (each a
// new place for the fault, new node seeds and window phases), the share of faults named exactly,
// the share with a wrong link named, the time from the fault to the fleet-wide name and the
// per-node packet rates.
//   bench_prober_fleet_sim [--nodes N] [--leaf-size K] [--spines S] [--trials T] [--seed X]
//                          [--designs plan,sample] [--kinds 0,1,...] [--warmup S] [--horizon S]
//                          [--flows F] [--verbose]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bench/prober/fleet_sim.h"

using namespace rdma::bench;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const auto comma = s.find(',', at);
    out.push_back(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// The q-quantile (nearest rank) of times, a fault never named counting as infinite.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::infinity();
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(q * static_cast<double>(v.size()))));
  return v[std::min(rank, v.size()) - 1];
}

std::string seconds(double s, double horizon) {
  if (s > horizon) return ">" + std::to_string(static_cast<int>(horizon)) + " s";
  char b[32];
  std::snprintf(b, sizeof b, "%.0f s", s);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  FleetConfig base;
  base.nodes = 1024;
  base.leaf_size = 32;
  base.spines = 16;
  base.warmup_s = 120;
  base.horizon_s = 240;
  int trials = 10;
  bool verbose = false;
  std::vector<Design> designs{Design::kPlan, Design::kSample};
  std::vector<FaultKind> kinds(std::begin(kAllFaults), std::end(kAllFaults));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--nodes") base.nodes = std::stoul(value());
    else if (a == "--leaf-size") base.leaf_size = std::stoul(value());
    else if (a == "--spines") base.spines = std::stoul(value());
    else if (a == "--trials") trials = std::stoi(value());
    else if (a == "--seed") base.seed = std::stoull(value());
    else if (a == "--warmup") base.warmup_s = std::stod(value());
    else if (a == "--horizon") base.horizon_s = std::stod(value());
    else if (a == "--flows") base.flows = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--fraction") base.fraction = std::stod(value());
    else if (a == "--verbose") verbose = true;
    else if (a == "--designs") {
      designs.clear();
      for (const auto& d : split(value())) designs.push_back(d == "sample" ? Design::kSample : Design::kPlan);
    } else if (a == "--kinds") {
      kinds.clear();
      for (const auto& k : split(value())) kinds.push_back(kAllFaults[std::stoul(k)]);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  std::printf("%zu nodes, leaves of %zu, %zu spines, 1 rail simulated, %d faults per kind, fraction %.2f, flows %u\n\n",
              base.nodes, base.leaf_size, base.spines, trials, base.fraction, base.flows);
  std::printf("| fault | design | named exactly | wrong link named | time to name median | p95 | probes/node/s | trace pkts/node/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  for (const auto kind : kinds)
    for (const auto design : designs) {
      int exact = 0, wrong = 0;
      std::vector<double> times;
      double probes = 0, traces = 0;
      for (int t = 0; t < trials; ++t) {
        FleetConfig c = base;
        c.design = design;
        c.fault = kind;
        c.seed = base.seed + static_cast<std::uint64_t>(t);
        const FleetResult r = run_fleet(c);
        exact += r.exact;
        wrong += r.wrong;
        times.push_back(r.named_after ? *r.named_after : std::numeric_limits<double>::infinity());
        probes += r.probes_per_node_s;
        traces += r.trace_packets_per_node_s;
        if (verbose) {
          std::fprintf(stderr, "%s %s seed %llu: named %s after %.0f s, wrong %d (", fault_name(kind), design_name(design),
                       static_cast<unsigned long long>(c.seed), r.named_after ? "yes" : "no",
                       r.named_after ? *r.named_after : -1.0, r.wrong ? 1 : 0);
          for (const auto& l : r.wrong_links) std::fprintf(stderr, "%s->%s ", l.from.c_str(), l.to.c_str());
          std::fprintf(stderr, ") max nodes %zu, withheld %llu\n", r.max_nodes_naming,
                       static_cast<unsigned long long>(r.withheld));
        }
      }
      std::printf("| %s | %s | %d/%d | %d/%d | %s | %s | %.1f | %.2f |\n", fault_name(kind), design_name(design), exact,
                  trials, wrong, trials, seconds(quantile(times, 0.5), base.horizon_s).c_str(),
                  seconds(quantile(times, 0.95), base.horizon_s).c_str(), probes / trials, traces / trials);
      std::fflush(stdout);
    }
  return 0;
}
