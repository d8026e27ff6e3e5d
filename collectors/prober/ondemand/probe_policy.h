// Who may run /probe and against what (docs/probe.md, "Access"), and what an answer may tell the
// caller. Pure functions without verbs or sockets, unit-tested: the service asks them before it
// resolves a name or opens a connection, so a refused request costs the target nothing.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdma::collectors::prober {

// An IPv4 or IPv6 network ("10.0.0.0/8", "fd00::/64", "10.1.2.3" = /32).
struct Cidr {
  int family = 0;                     // AF_INET or AF_INET6
  std::array<std::uint8_t, 16> net{};  // network address, host bits zero
  int prefix = 0;
  bool operator==(const Cidr&) const = default;
};
std::optional<Cidr> parse_cidr(std::string_view text);
// `address` numeric; false for another family or a name.
bool cidr_contains(const Cidr& net, const std::string& address);

// The prober's peers as probe targets: (numeric address, responder TCP port).
using PeerEndpoints = std::set<std::pair<std::string, std::uint16_t>>;

struct ProbeAccess {
  // Callers without basic auth or a verified client certificate may probe (allowed targets only).
  bool allow_unauthenticated = false;
  // Targets beyond the known peers: addresses in these networks, at one of target_ports.
  std::vector<Cidr> target_cidrs;
  std::set<std::uint16_t> target_ports;  // the fleet's responder ports (listen and dns port)
  // Names a target may be given by, lower case -> what to resolve: each static peer's `name`
  // (-> its configured address) and each static peer configured by host name (-> itself).
  std::map<std::string, std::string> target_names;
};

// The names of `statics` (the configured peers, before resolution) as target_names.
std::map<std::string, std::string> peer_target_names(const std::vector<std::pair<std::string, std::string>>& name_address);

// What /probe goes on with for the target's host, before anything is resolved: a numeric address
// as given; a name only when target_names has it (its value: a numeric address, or a configured
// host name to resolve); nullopt otherwise, refused without a lookup, so that a caller cannot
// use the node's resolver (or learn what it resolves) through /probe.
std::optional<std::string> target_host(const ProbeAccess& access, const std::string& host);

// Is `address`:`port` a target /probe may connect to? A known peer at its own responder port, or
// an address in target_cidrs at one of target_ports. Never anything else, whoever asks.
bool target_allowed(const ProbeAccess& access, const PeerEndpoints& known, const std::string& address, std::uint16_t port);

// The failure reason an answer shows. An authenticated caller sees the detail; anyone else sees
// one reason, target_unreachable, for every failure to reach the target's responder (refused,
// open but not speaking the handshake, silent, wrong secret, rejected), so that the answers do
// not tell closed, open and filtered ports apart. Local reasons (busy, no_local_port, ...) stay.
std::string visible_reason(const std::string& reason, bool target_failure, bool authenticated);
inline constexpr std::string_view kTargetUnreachable = "target_unreachable";

// rdma_probe_requests_total{module,result}: one registry for the process, so that the counts
// survive a reload that builds a new prober collector (exact u64, never reset).
class ProbeRequestCounts {
 public:
  static ProbeRequestCounts& process();
  void add(const std::string& module, const std::string& result);
  std::map<std::pair<std::string, std::string>, std::uint64_t> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> counts_;
};

// Memory a node spends on on-demand probe sessions, process-wide: the buffers of the probes it
// runs (reserved before a session opens; a probe past the budget is refused, reason
// memory_budget). The budget is ProbeLimits::kLocalSessionBytes.
class SessionBudget {
 public:
  explicit SessionBudget(std::size_t limit) : limit_(limit) {}
  static SessionBudget& process();
  bool reserve(std::size_t bytes);
  void release(std::size_t bytes);
  std::size_t in_use() const;

 private:
  const std::size_t limit_;
  mutable std::mutex mu_;
  std::size_t used_ = 0;
};

}  // namespace rdma::collectors::prober
