// The PMA agent reader (sources/mad/pma_agent.h) against a scripted agent: what it asks in which
// round, and its one rule for learned state: ClassPortInfo once per agent and LID, forgotten after
// any failed query, a LID change or forget(); "unsupported" and a dropped PortExtendedSpeedsCounters
// are state (not asked again, not a failure).
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "sources/mad/pma_agent.h"

using namespace rdma::mad;

namespace {

constexpr std::uint16_t kCap = kCapExtWidth | kCapXmitWait;  // 0x1200, an ibsim CA

// An agent that answers every query by attribute: ok, or the outcome/status scripted for it.
struct ScriptedAgent {
  std::map<PmaAttr, PmaReply> script;  // attribute -> reply other than ok
  std::vector<std::pair<Round, std::vector<PmaAttr>>> rounds;  // what was asked
  std::size_t send_at_most = SIZE_MAX;                         // a budget that runs out
  std::uint16_t cap = kCap;

  std::vector<PmaReply> operator()(std::span<const PmaQuery> qs, Round round) {
    std::vector<PmaAttr> asked;
    std::vector<PmaReply> out;
    for (const PmaQuery& q : qs) {
      if (out.size() >= send_at_most) break;
      asked.push_back(q.attr);
      PmaReply r;
      r.outcome = Outcome::kOk;
      r.attempts = 1;
      if (q.attr == PmaAttr::kClassPortInfo) {
        r.data[2] = static_cast<std::uint8_t>(cap >> 8);
        r.data[3] = static_cast<std::uint8_t>(cap);
      }
      if (auto it = script.find(q.attr); it != script.end()) r = it->second;
      out.push_back(r);
    }
    rounds.emplace_back(round, asked);
    return out;
  }
  QueryFn fn() {
    return [this](std::span<const PmaQuery> qs, Round round) { return (*this)(qs, round); };
  }
};

PmaReply outcome(Outcome o, std::uint16_t status = 0) {
  PmaReply r;
  r.outcome = o;
  r.status = status;
  r.attempts = o == Outcome::kTimeout ? 3 : 1;
  return r;
}

const ChooseFn kCounters = [](std::uint16_t cap, std::size_t, std::size_t) {
  std::vector<PmaAttr> a{PmaAttr::kPortCounters};
  if (cap & kCapExtWidth) a.push_back(PmaAttr::kPortCountersExtended);
  a.push_back(PmaAttr::kPortRcvErrorDetails);
  a.push_back(PmaAttr::kPortExtendedSpeedsCounters);
  return a;
};

AgentAsk one_port(std::uint16_t lid = 7) { return {.key = "mlx5_0/1", .lid = lid, .port_select = 1, .ports = {{lid, 1}}}; }

}  // namespace

TEST_CASE("agent reader: ClassPortInfo once, then the chosen attributes in rounds") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  const AgentAsk ask = one_port();
  auto r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  REQUIRE(agent.rounds.size() == 3);
  CHECK(agent.rounds[0] == std::pair{Round::kClassPortInfo, std::vector{PmaAttr::kClassPortInfo}});
  CHECK(agent.rounds[1] == std::pair{Round::kCounters, std::vector{PmaAttr::kPortCounters, PmaAttr::kPortCountersExtended,
                                                                   PmaAttr::kPortRcvErrorDetails}});
  CHECK(agent.rounds[2] == std::pair{Round::kDroppable, std::vector{PmaAttr::kPortExtendedSpeedsCounters}});
  REQUIRE(r.agents.size() == 1);
  CHECK(r.agents[0].cap == kCap);
  CHECK(r.agents[0].ports[0].answered());
  CHECK(r.agents[0].ports[0].readings.ext.has_value());
  CHECK(r.agents[0].ports[0].readings.ext_speeds.has_value());
  CHECK(reader.known_cap("mlx5_0/1") == kCap);
  agent.rounds.clear();
  reader.read(std::span(&ask, 1), kCounters, agent.fn());
  REQUIRE(agent.rounds.size() == 2);  // known: no ClassPortInfo
  CHECK(agent.rounds[0].first == Round::kCounters);
}

TEST_CASE("agent reader: another LID asks ClassPortInfo again") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  AgentAsk ask = one_port(7);
  reader.read(std::span(&ask, 1), kCounters, agent.fn());
  ask = one_port(9);
  agent.rounds.clear();
  reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(agent.rounds[0].first == Round::kClassPortInfo);
}

TEST_CASE("agent reader: a failed query forgets the agent, refusals included") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  agent.script[PmaAttr::kPortRcvErrorDetails] = outcome(Outcome::kStatus, 0x000C);  // unsupported
  const AgentAsk ask = one_port();
  auto r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK_FALSE(r.agents[0].failed());
  CHECK(r.agents[0].ports[0].refused.has(PmaAttr::kPortRcvErrorDetails));
  CHECK(r.agents[0].ports[0].newly_refused.size() == 1);
  // refused: not asked again, and not reported again as newly refused
  agent.rounds.clear();
  r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(agent.rounds[0].second == std::vector{PmaAttr::kPortCounters, PmaAttr::kPortCountersExtended});
  CHECK(r.agents[0].ports[0].newly_refused.empty());
  // a timeout: a failure (with its timeouts counted), the data counters left out, the agent forgotten
  agent.script[PmaAttr::kPortCountersExtended] = outcome(Outcome::kTimeout);
  r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(r.agents[0].failed());
  CHECK(r.agents[0].timeouts == 3);
  CHECK(r.agents[0].ports[0].readings.ext_failed);
  CHECK_FALSE(r.agents[0].ports[0].answered());
  CHECK(r.agents[0].ports[0].failures.at(0).describe() == "PortCountersExtended timeout");
  CHECK_FALSE(reader.known_cap("mlx5_0/1"));
  agent.script.clear();
  agent.rounds.clear();
  reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(agent.rounds[0].first == Round::kClassPortInfo);
  CHECK(agent.rounds[1].second.size() == 3);  // PortRcvErrorDetails asked again
}

TEST_CASE("agent reader: a failed ClassPortInfo reads nothing and learns nothing") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  agent.script[PmaAttr::kClassPortInfo] = outcome(Outcome::kSendError);
  const AgentAsk ask = one_port();
  auto r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(agent.rounds.size() == 1);
  REQUIRE(r.agents[0].cpi_failure);
  CHECK(r.agents[0].cpi_failure->outcome() == Outcome::kSendError);
  CHECK_FALSE(r.agents[0].cap);
  CHECK(r.agents[0].failed());
  // "unsupported" to a mandatory attribute is a failure, not a refusal
  agent.script[PmaAttr::kClassPortInfo] = outcome(Outcome::kStatus, 0x000C);
  r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  REQUIRE(r.agents[0].cpi_failure);
  CHECK(r.agents[0].cpi_failure->describe() == "ClassPortInfo mad_status " + status_text(0x000C));
}

TEST_CASE("agent reader: a dropped PortExtendedSpeedsCounters is a refusal without retries, not a failure") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  agent.script[PmaAttr::kPortExtendedSpeedsCounters] = outcome(Outcome::kTimeout);
  const AgentAsk ask = one_port();
  auto r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK_FALSE(r.agents[0].failed());
  CHECK(r.agents[0].timeouts == 0);  // not counted against the agent
  CHECK(r.agents[0].ports[0].refused.has(PmaAttr::kPortExtendedSpeedsCounters));
  CHECK(round_options(QueryOptions{}, Round::kDroppable).retries == 0);
  CHECK(round_options(QueryOptions{}, Round::kCounters).retries == QueryOptions{}.retries);
  agent.rounds.clear();
  reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(agent.rounds.size() == 1);  // counters only: no droppable round
  // another failure of it (a busy status) is neither a refusal nor a failure: asked again
  PmaAgentReader fresh;
  agent.script[PmaAttr::kPortExtendedSpeedsCounters] = outcome(Outcome::kStatus, 0x0001);
  r = fresh.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK_FALSE(r.agents[0].failed());
  CHECK_FALSE(r.agents[0].ports[0].refused.has(PmaAttr::kPortExtendedSpeedsCounters));
}

TEST_CASE("agent reader: a budget that runs out ends the read, learning nothing") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  agent.send_at_most = 0;
  const AgentAsk ask = one_port();
  auto r = reader.read(std::span(&ask, 1), kCounters, agent.fn());
  CHECK(r.incomplete);
  CHECK_FALSE(reader.known_cap("mlx5_0/1"));
}

TEST_CASE("agent reader: forget and retain") {
  PmaAgentReader reader;
  ScriptedAgent agent;
  const std::vector<AgentAsk> asks{{.key = "a", .lid = 1, .port_select = 0, .ports = {{1, 1}, {1, 2}}},
                                   {.key = "b", .lid = 2, .port_select = 0, .ports = {{2, 1}}}};
  auto r = reader.read(asks, kCounters, agent.fn());
  REQUIRE(r.agents.size() == 2);
  CHECK(r.agents[0].ports.size() == 2);
  CHECK(reader.known_cap("a"));
  CHECK(reader.known_cap("b"));
  reader.retain([](const std::string& k) { return k == "a"; });
  CHECK(reader.known_cap("a"));
  CHECK_FALSE(reader.known_cap("b"));
  reader.forget("a");
  CHECK_FALSE(reader.known_cap("a"));
  reader.read(asks, kCounters, agent.fn());
  reader.forget_all();
  CHECK_FALSE(reader.known_cap("a"));
  CHECK_FALSE(reader.known_cap("b"));
}

TEST_CASE("agent reader: with freshness, what one caller read a moment ago is not asked again by another") {
  PmaAgentReader reader(std::chrono::milliseconds(60000));
  ScriptedAgent agent;
  const AgentAsk ask = one_port();
  const ChooseFn pc_only = [](std::uint16_t, std::size_t, std::size_t) { return std::vector{PmaAttr::kPortCounters}; };
  reader.read(std::span(&ask, 1), pc_only, agent.fn(), 1);  // the port collector: ClassPortInfo + PortCounters
  agent.rounds.clear();
  auto r = reader.read(std::span(&ask, 1), kCounters, agent.fn(), 2);  // the pma collector: the rest only
  REQUIRE(agent.rounds.size() == 2);
  CHECK(agent.rounds[0].second == std::vector{PmaAttr::kPortCountersExtended, PmaAttr::kPortRcvErrorDetails});
  CHECK(r.agents[0].ports[0].answered());  // PortCounters from the first read's answer
  // a caller's own answers are never reused: its next read asks anew
  agent.rounds.clear();
  reader.read(std::span(&ask, 1), pc_only, agent.fn(), 1);
  CHECK(agent.rounds.size() == 1);  // PortCounters: read by caller 1 itself
  agent.rounds.clear();
  reader.read(std::span(&ask, 1), kCounters, agent.fn(), 2);
  CHECK(agent.rounds.at(0).second == std::vector{PmaAttr::kPortCountersExtended, PmaAttr::kPortRcvErrorDetails});
  // another LID: nothing is fresh
  const AgentAsk moved = one_port(9);
  agent.rounds.clear();
  reader.read(std::span(&moved, 1), pc_only, agent.fn(), 1);
  CHECK(agent.rounds.size() == 2);
  // without freshness every read asks
  PmaAgentReader plain;
  plain.read(std::span(&ask, 1), pc_only, agent.fn());
  agent.rounds.clear();
  plain.read(std::span(&ask, 1), pc_only, agent.fn());
  CHECK(agent.rounds.at(0).second == std::vector{PmaAttr::kPortCounters});
}
