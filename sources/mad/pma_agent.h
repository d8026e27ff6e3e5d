// One reader of PMA agents: the protocol every caller of PerfMgt Gets follows (the port
// collector's counters-source mad, the pma collector's local mode, its fabric snapshot and its
// /pma?target= reads), written once. It turns "these agents, their ports, these attributes, this
// budget" into readings and outcomes, and owns what each agent said about itself.
//
// Rounds: ClassPortInfo of the agents not known (yet, or any more); then the attributes the
// caller chooses for every port of every known agent, minus those the port refused; then the
// droppable attributes (PortExtendedSpeedsCounters) without retries. The caller's QueryFn is the
// budget: it sends a round through its MadClient (window, timeouts, retries, chunks, rate caps) and
// may send less than asked (stopped, rate-limited): the read then ends there, `incomplete`, and
// learns nothing from that round.
//
// THE RULE for learned state (ClassPortInfo CapabilityMask, the LID it was learned at, the
// optional attributes each port refused): it is kept until
//   1. the agent is asked at another LID than the one it was learned at,
//   2. any query to the agent fails (timeout, send error, malformed reply, an error status; not an
//      "unsupported" answer to an optional attribute): the agent may have restarted or been
//      replaced, so ClassPortInfo and the refused attributes are asked again next time,
//   3. the caller forgets it (forget/forget_all/retain: a port gone down or replaced, a new fabric
//      discovery).
// An "unsupported" status to an optional attribute, and no reply to a droppable one (agents that
// lack PortExtendedSpeedsCounters may drop it silently: ibsim does), is state, not a failure: the
// port's attribute is refused and not asked again until the agent's state is forgotten. Other
// failures of a droppable attribute are left out (asked again next time, not counted, no reset).
//
// Freshness (fresh_for > 0, the local ports' shared reader): an attribute a port answered another
// caller less than fresh_for ago (at the same LID) is taken from that answer instead of asked
// again (a caller's own answers never: its next scrape reads anew), and reads
// of one agent take turns, so that the port collector and the pma collector's local mode, both
// reading a local port in one scrape, send each attribute once (docs/developing.md, "One reader of
// a local port's PMA counters").
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sources/mad/mad_client.h"
#include "sources/mad/pma_counters.h"
#include "sources/mad/pma_decode.h"

namespace rdma::mad {

// The optional PerfMgt attributes (IBA vol1 16.1.3: of the ones read here only PortCounters is
// mandatory, besides ClassPortInfo). A real agent may answer one of them with an "unsupported"
// MAD status; that is a property of the port, learned per port and exported as state.
inline constexpr std::array<PmaAttr, 4> kOptionalAttrs = {PmaAttr::kPortCountersExtended, PmaAttr::kPortRcvErrorDetails,
                                                          PmaAttr::kPortXmitDiscardDetails,
                                                          PmaAttr::kPortVLXmitWaitCounters};

// Attributes an agent may drop instead of answering "unsupported": asked without retries, and
// no reply is a refusal.
inline bool droppable(PmaAttr a) { return a == PmaAttr::kPortExtendedSpeedsCounters; }

// A set of attributes, a bit per attribute ID (every ID read here is below 32).
class AttrSet {
 public:
  bool has(PmaAttr a) const { return bits_ & bit(a); }
  void add(PmaAttr a) { bits_ |= bit(a); }
  void add(const AttrSet& other) { bits_ |= other.bits_; }

 private:
  static constexpr std::uint32_t bit(PmaAttr a) { return std::uint32_t{1} << (static_cast<unsigned>(a) & 31u); }
  std::uint32_t bits_ = 0;
};

// True when `reply` to `attr` says the agent does not implement it (optional attributes only: a
// refused PortCounters or ClassPortInfo is a failure).
bool says_unsupported(PmaAttr attr, const PmaReply& reply);

struct AgentPort {
  std::uint16_t lid = 0;
  std::uint8_t port_select = 0;
};
struct AgentAsk {
  std::string key;        // the agent in the reader's state ("mlx5_0/1", a node GUID)
  std::uint16_t lid = 0;  // where ClassPortInfo goes
  std::uint8_t port_select = 0;  // ClassPortInfo's PortSelect (agents ignore it)
  std::vector<AgentPort> ports;
};

struct Failure {
  PmaAttr attr;
  PmaReply reply;  // outcome kOk: a reply that did not decode (malformed)
  Outcome outcome() const { return reply.outcome == Outcome::kOk ? Outcome::kMalformed : reply.outcome; }
  // "PortCounters timeout", "ClassPortInfo mad_status unsupported attribute"
  std::string describe() const;
};

struct PortRead {
  PortReadings readings;
  std::vector<Failure> failures;  // empty: every asked attribute answered or was refused
  AttrSet refused;                // refused by this port, this read included
  std::vector<Failure> newly_refused;  // refused in this read (to be logged once)
  bool failed() const { return !failures.empty(); }
  bool answered() const { return !failed() && readings.pc.has_value(); }
};

struct AgentRead {
  std::optional<std::uint16_t> cap;  // nullopt: ClassPortInfo failed (cpi_failure) or was not sent
  std::optional<Failure> cpi_failure;
  std::vector<PortRead> ports;  // one per AgentAsk::ports, same order
  std::uint64_t timeouts = 0;   // attempts that timed out (ClassPortInfo and counters rounds)
  bool failed() const;          // ClassPortInfo or any port's query failed: the state was forgotten
  AttrSet refused() const;      // the union over the ports
};

struct AgentReads {
  std::vector<AgentRead> agents;  // one per AgentAsk, same order
  bool incomplete = false;        // the QueryFn sent less than asked: the read stopped there
};

enum class Round { kClassPortInfo, kCounters, kDroppable };
// Sends `qs` and returns one reply per query, same order; fewer replies: not sent (stop, rate cap).
using QueryFn = std::function<std::vector<PmaReply>(std::span<const PmaQuery> qs, Round round)>;
// The attributes for port `port` of agent `agent` (indexes into the asks) given its capability
// mask; refused ones are dropped by the reader.
using ChooseFn = std::function<std::vector<PmaAttr>(std::uint16_t cap, std::size_t agent, std::size_t port)>;

// `opts` for a round: a droppable round goes without retries.
QueryOptions round_options(QueryOptions opts, Round round);

class PmaAgentReader {
 public:
  explicit PmaAgentReader(std::chrono::milliseconds fresh_for = {}) : fresh_for_(fresh_for) {}
  // Safe to call from several threads (each read works on a copy of its agents' state).
  // `caller` names who reads (freshness: another caller's answers are reused, never its own).
  AgentReads read(std::span<const AgentAsk> asks, const ChooseFn& choose, const QueryFn& query, int caller = 0);
  void forget(const std::string& key);
  void forget_all();
  // Forgets every agent for which keep(key) is false.
  void retain(const std::function<bool(const std::string&)>& keep);
  // The capability mask learned for `key`, if any.
  std::optional<std::uint16_t> known_cap(const std::string& key) const;

 private:
  struct Answer {
    std::chrono::steady_clock::time_point at;
    PmaReply reply;
    int caller = 0;
  };
  struct State {
    std::uint16_t lid = 0;
    std::uint16_t cap = 0;
    std::map<std::uint8_t, AttrSet> refused;  // by port select
    std::map<std::pair<std::uint8_t, PmaAttr>, Answer> recent;  // fresh_for > 0: the last answers
  };
  AgentReads read_locked(std::span<const AgentAsk> asks, const ChooseFn& choose, const QueryFn& query, int caller);
  const std::chrono::milliseconds fresh_for_;
  mutable std::mutex mu_;
  std::map<std::string, State> agents_;
  std::map<std::string, std::shared_ptr<std::mutex>> turns_;  // fresh_for > 0: one read of an agent at a time
};

// The reader of the local ports' agents, shared by the port collector (counters-source auto and
// mad) and the pma collector's local mode, keyed "<ca>/<port>": what one of them read less than
// kLocalFreshFor ago is not asked again by the other. Shorter than any scrape interval, longer than
// the collectors of one scrape take between them.
inline constexpr std::chrono::milliseconds kLocalFreshFor{1000};
enum LocalCaller : int { kPortCollector = 1, kPmaLocal = 2 };
PmaAgentReader& local_port_agents();

}  // namespace rdma::mad
