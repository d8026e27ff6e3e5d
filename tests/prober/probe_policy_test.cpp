// /probe access (probe_policy.h): networks, allowed targets, what an anonymous caller may see,
// the process-wide request counts and session budget; and the worst-case session memory of the
// shipped defaults against the shipped DaemonSet memory limits.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <arpa/inet.h>

#include <map>
#include <string>

#include "collectors/prober/ondemand/probe_module.h"
#include "collectors/prober/ondemand/probe_policy.h"

using namespace rdma::collectors::prober;

TEST_CASE("probe policy: networks parse and contain addresses of their family") {
  auto net = parse_cidr("10.1.0.0/16");
  REQUIRE(net);
  CHECK(net->family == AF_INET);
  CHECK(cidr_contains(*net, "10.1.255.7"));
  CHECK_FALSE(cidr_contains(*net, "10.2.0.1"));
  CHECK_FALSE(cidr_contains(*net, "::ffff:10.1.0.1"));  // another family
  CHECK_FALSE(cidr_contains(*net, "node1"));            // names never match
  auto host_bits = parse_cidr("10.1.2.3/8");             // host bits are dropped
  REQUIRE(host_bits);
  CHECK(cidr_contains(*host_bits, "10.200.0.1"));
  auto one = parse_cidr("192.168.0.5");
  REQUIRE(one);
  CHECK(one->prefix == 32);
  CHECK(cidr_contains(*one, "192.168.0.5"));
  CHECK_FALSE(cidr_contains(*one, "192.168.0.4"));
  auto v6 = parse_cidr("fd00:1::/32");
  REQUIRE(v6);
  CHECK(cidr_contains(*v6, "fd00:1:abcd::1"));
  CHECK_FALSE(cidr_contains(*v6, "fd00:2::1"));
  CHECK(cidr_contains(*parse_cidr("0.0.0.0/0"), "8.8.8.8"));
  for (const char* bad : {"", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8x", "node1/8", "fd00::/129", "10.0.0/8"})
    CHECK_FALSE(parse_cidr(bad));
}

TEST_CASE("probe policy: targets are known peers at their port or CIDR addresses at a responder port") {
  ProbeAccess a;
  a.target_cidrs = {*parse_cidr("10.9.0.0/24")};
  a.target_ports = {9662};
  const PeerEndpoints known = {{"10.0.0.2", 9662}, {"10.0.0.3", 9700}};
  CHECK(target_allowed(a, known, "10.0.0.2", 9662));
  CHECK(target_allowed(a, known, "10.0.0.3", 9700));        // a static peer's own port
  CHECK_FALSE(target_allowed(a, known, "10.0.0.2", 22));    // a peer, another port: never a port scan
  CHECK_FALSE(target_allowed(a, known, "10.0.0.4", 9662));  // unknown address
  CHECK(target_allowed(a, known, "10.9.0.77", 9662));
  CHECK_FALSE(target_allowed(a, known, "10.9.0.77", 9700));  // CIDR targets only at target_ports
  CHECK_FALSE(target_allowed(a, known, "10.9.1.1", 9662));
  CHECK_FALSE(target_allowed(ProbeAccess{}, {}, "127.0.0.1", 9662));  // nothing configured: nothing
}

TEST_CASE("probe policy: a target name goes on only when the config names it, before any lookup") {
  ProbeAccess a;
  // Static peers as configured: a name for an address, a host name alone, a name for a host name,
  // and an address alone (no name to add).
  a.target_names = peer_target_names({{"node12", "10.0.0.12"},
                                      {"", "Node13.example"},
                                      {"rack4-a", "node14.example"},
                                      {"", "10.0.0.15"},
                                      {"10.0.0.16", "10.0.0.16"}});
  CHECK(a.target_names == std::map<std::string, std::string>{{"node12", "10.0.0.12"},
                                                             {"node13.example", "Node13.example"},
                                                             {"rack4-a", "node14.example"},
                                                             {"node14.example", "node14.example"}});
  // Numeric: as given, whatever the names.
  CHECK(target_host(a, "10.9.9.9") == "10.9.9.9");
  CHECK(target_host(a, "fd00::1") == "fd00::1");
  // A peer's name maps to its configured address: no lookup at all for node12.
  CHECK(target_host(a, "node12") == "10.0.0.12");
  CHECK(target_host(a, "NODE12") == "10.0.0.12");  // names compare without case
  CHECK(target_host(a, "node13.example") == "Node13.example");
  CHECK(target_host(a, "rack4-a") == "node14.example");
  // Anything else is refused before a resolver sees it.
  CHECK(!target_host(a, "node99"));
  CHECK(!target_host(a, "exfil.attacker.example"));
  CHECK(!target_host(a, "localhost"));
  CHECK(!target_host(a, "10.0.0.12.nip.io"));
  CHECK(!target_host(ProbeAccess{}, "node12"));
}

TEST_CASE("probe policy: an anonymous caller cannot tell closed, open and silent ports apart") {
  for (const char* r : {"no_responder", "handshake_io", "handshake_bad_header", "wrong_secret", "rejected_busy"}) {
    CHECK(visible_reason(r, true, false) == kTargetUnreachable);
    CHECK(visible_reason(r, true, true) == r);  // authenticated: the detail
  }
  for (const char* r : {"busy", "no_local_port", "port_not_active", "memory_budget", "timeout"})
    CHECK(visible_reason(r, false, false) == r);  // local reasons say nothing about the network
}

TEST_CASE("probe policy: request counts are one registry for the process") {
  auto& counts = ProbeRequestCounts::process();
  const auto before = counts.snapshot()[{"m-policy-test", "success"}];
  counts.add("m-policy-test", "success");
  CHECK(&ProbeRequestCounts::process() == &counts);
  CHECK(counts.snapshot()[{"m-policy-test", "success"}] == before + 1);
}

TEST_CASE("probe policy: the session budget refuses past its limit and gives back") {
  SessionBudget b(100);
  CHECK(b.reserve(60));
  CHECK_FALSE(b.reserve(41));
  CHECK(b.reserve(40));
  CHECK(b.in_use() == 100);
  b.release(60);
  CHECK(b.reserve(60));
  b.release(1000);  // never below zero
  CHECK(b.in_use() == 0);
}

namespace {
// "256Mi", "1Gi", "300M" -> bytes (the Kubernetes quantities the manifests use).
std::uint64_t quantity_bytes(const std::string& q) {
  std::size_t used = 0;
  const double v = std::stod(q, &used);
  const std::string unit = q.substr(used);
  if (unit == "Ki") return static_cast<std::uint64_t>(v * 1024);
  if (unit == "Mi") return static_cast<std::uint64_t>(v * 1024 * 1024);
  if (unit == "Gi") return static_cast<std::uint64_t>(v * 1024 * 1024 * 1024);
  if (unit == "M") return static_cast<std::uint64_t>(v * 1e6);
  if (unit == "G") return static_cast<std::uint64_t>(v * 1e9);
  if (unit.empty()) return static_cast<std::uint64_t>(v);
  FAIL("unknown quantity " << q);
  return 0;
}

std::uint64_t memory_limit(const std::string& manifest) {
  const auto ds = YAML::LoadFile(std::string(RDMA_SOURCE_DIR) + "/" + manifest);
  for (const auto& c : ds["spec"]["template"]["spec"]["containers"])
    if (c["name"].as<std::string>() == "rdma-exporter" && c["resources"]["limits"]["memory"])
      return quantity_bytes(c["resources"]["limits"]["memory"].as<std::string>());
  FAIL(manifest << ": no memory limit on the rdma-exporter container");
  return 0;
}

// The exporter's own memory beside the sessions: 12.4 MiB RSS measured with the prober and
// /probe on over the fixtures tree (docs/probe.md, "Memory"). 80 MiB leaves room for the mesh's
// queue pairs of the base's default limits and allocator slack; the prober overlay's 512Mi
// covers its larger mesh on top.
constexpr std::uint64_t kBaselineBytes = 80u << 20;
}  // namespace

TEST_CASE("probe policy: worst-case session memory and the exporter fit the shipped memory limits") {
  // What one node can be made to hold: the responder's sessions for others and its own probes.
  constexpr std::uint64_t worst = ProbeLimits::kWorstCaseSessionBytes;
  STATIC_REQUIRE(worst == ProbeLimits::kResponderSessionBytes + ProbeLimits::kLocalSessionBytes);
  // A module cannot ask a responder for more than its budget, nor a probe for more than the local one.
  STATIC_REQUIRE(ProbeLimits::kMaxSessionBytes <= ProbeLimits::kResponderSessionBytes);
  STATIC_REQUIRE(ProbeLimits::kMaxSize <= ProbeLimits::kLocalSessionBytes);
  for (const char* manifest : {"deploy/kubernetes/base/daemonset.yaml", "deploy/kubernetes/overlays/prober/daemonset-prober.yaml"}) {
    INFO(manifest);
    const auto limit = memory_limit(manifest);
    CHECK(worst + kBaselineBytes <= limit);
    CHECK(worst <= limit / 2);  // "well below": the sessions never take more than half of it
  }
}
