#include "sources/mad/pma_agent.h"

#include <algorithm>

namespace rdma::mad {
namespace {

// Only timeouts are retried: every attempt but a final non-timeout one timed out.
std::uint64_t timeouts_of(const PmaReply& r) {
  if (r.outcome == Outcome::kTimeout) return r.attempts;
  return r.attempts ? r.attempts - 1u : 0u;
}

bool dropped_or_refused(const PmaReply& r) {
  return (r.outcome == Outcome::kStatus && status_unsupported(r.status)) || r.outcome == Outcome::kTimeout;
}

}  // namespace

bool says_unsupported(PmaAttr attr, const PmaReply& reply) {
  return std::find(kOptionalAttrs.begin(), kOptionalAttrs.end(), attr) != kOptionalAttrs.end() &&
         reply.outcome == Outcome::kStatus && status_unsupported(reply.status);
}

std::string Failure::describe() const {
  std::string s = std::string(attr_name(attr)) + " " + std::string(outcome_label(outcome()));
  if (reply.status) s += " " + status_text(reply.status);
  return s;
}

bool AgentRead::failed() const {
  if (cpi_failure) return true;
  return std::any_of(ports.begin(), ports.end(), [](const PortRead& p) { return p.failed(); });
}

AttrSet AgentRead::refused() const {
  AttrSet all;
  for (const auto& p : ports) all.add(p.refused);
  return all;
}

QueryOptions round_options(QueryOptions opts, Round round) {
  if (round == Round::kDroppable) opts.retries = 0;
  return opts;
}

AgentReads PmaAgentReader::read(std::span<const AgentAsk> asks, const ChooseFn& choose, const QueryFn& query,
                                int caller) {
  if (fresh_for_.count() == 0) return read_locked(asks, choose, query, caller);
  // Turns in key order (a std::map's), so that two reads of overlapping agents cannot deadlock.
  std::map<std::string, std::shared_ptr<std::mutex>> mine;
  {
    std::lock_guard lock(mu_);
    for (const AgentAsk& a : asks) {
      auto& m = turns_[a.key];
      if (!m) m = std::make_shared<std::mutex>();
      mine.emplace(a.key, m);
    }
  }
  std::vector<std::unique_lock<std::mutex>> held;
  for (auto& [key, m] : mine) held.emplace_back(*m);
  return read_locked(asks, choose, query, caller);
}

AgentReads PmaAgentReader::read_locked(std::span<const AgentAsk> asks, const ChooseFn& choose, const QueryFn& query,
                                       int caller) {
  const auto now = std::chrono::steady_clock::now();
  AgentReads out;
  out.agents.resize(asks.size());
  std::vector<std::optional<State>> st(asks.size());
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < asks.size(); ++i)
      if (auto it = agents_.find(asks[i].key); it != agents_.end() && it->second.lid == asks[i].lid) st[i] = it->second;
  }
  for (std::size_t i = 0; i < asks.size(); ++i) out.agents[i].ports.resize(asks[i].ports.size());

  // 1. ClassPortInfo of the agents not known.
  std::vector<PmaQuery> qs;
  std::vector<std::size_t> who;
  for (std::size_t i = 0; i < asks.size(); ++i)
    if (!st[i]) {
      qs.push_back({asks[i].lid, asks[i].port_select, PmaAttr::kClassPortInfo});
      who.push_back(i);
    }
  if (!qs.empty()) {
    const auto replies = query(qs, Round::kClassPortInfo);
    if (replies.size() < qs.size()) {
      out.incomplete = true;
      return out;
    }
    for (std::size_t k = 0; k < qs.size(); ++k) {
      AgentRead& a = out.agents[who[k]];
      a.timeouts += timeouts_of(replies[k]);
      PortReadings r;
      if (replies[k].outcome == Outcome::kOk && store(r, PmaAttr::kClassPortInfo, replies[k]))
        st[who[k]] = State{.lid = asks[who[k]].lid, .cap = r.cap_mask, .refused = {}, .recent = {}};
      else
        a.cpi_failure = Failure{PmaAttr::kClassPortInfo, replies[k]};
    }
  }

  // 2. The chosen attributes of every port of the known agents; 3. the droppable ones.
  struct Slot {
    std::size_t agent, port;
  };
  std::vector<PmaQuery> counters, dropped;
  std::vector<Slot> counter_slots, dropped_slots;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    if (!st[i]) continue;
    AgentRead& a = out.agents[i];
    a.cap = st[i]->cap;
    for (std::size_t p = 0; p < asks[i].ports.size(); ++p) {
      const AgentPort& ap = asks[i].ports[p];
      PortRead& pr = a.ports[p];
      pr.readings.cap_mask = *a.cap;
      if (auto it = st[i]->refused.find(ap.port_select); it != st[i]->refused.end()) pr.refused = it->second;
      for (PmaAttr attr : choose(*a.cap, i, p)) {
        if (pr.refused.has(attr)) continue;
        if (auto it = st[i]->recent.find({ap.port_select, attr});
            it != st[i]->recent.end() && it->second.caller != caller && now - it->second.at < fresh_for_ &&
            store(pr.readings, attr, it->second.reply))
          continue;  // answered a moment ago (another collector of this scrape): not asked again
        (droppable(attr) ? dropped : counters).push_back({ap.lid, ap.port_select, attr});
        (droppable(attr) ? dropped_slots : counter_slots).push_back({i, p});
      }
    }
  }
  if (!counters.empty()) {
    const auto replies = query(counters, Round::kCounters);
    if (replies.size() < counters.size()) {
      out.incomplete = true;
      return out;
    }
    for (std::size_t k = 0; k < counters.size(); ++k) {
      const PmaAttr attr = counters[k].attr;
      const PmaReply& rep = replies[k];
      AgentRead& a = out.agents[counter_slots[k].agent];
      PortRead& pr = a.ports[counter_slots[k].port];
      a.timeouts += timeouts_of(rep);
      if (rep.outcome == Outcome::kOk && store(pr.readings, attr, rep)) {
        if (fresh_for_.count()) st[counter_slots[k].agent]->recent[{counters[k].port_select, attr}] = {now, rep, caller};
        continue;
      }
      if (says_unsupported(attr, rep)) {
        pr.refused.add(attr);
        pr.newly_refused.push_back({attr, rep});
        continue;
      }
      pr.readings.ext_failed |= attr == PmaAttr::kPortCountersExtended;
      pr.failures.push_back({attr, rep});
    }
  }
  if (!dropped.empty()) {
    const auto replies = query(dropped, Round::kDroppable);
    for (std::size_t k = 0; k < std::min(dropped.size(), replies.size()); ++k) {  // not sent: asked next time
      const PmaReply& rep = replies[k];
      PortRead& pr = out.agents[dropped_slots[k].agent].ports[dropped_slots[k].port];
      if (rep.outcome == Outcome::kOk && store(pr.readings, dropped[k].attr, rep)) continue;
      if (dropped_or_refused(rep)) {
        pr.refused.add(dropped[k].attr);
        pr.newly_refused.push_back({dropped[k].attr, rep});
      }
    }
  }

  // The rule (see the header): a failed agent is forgotten, an answering one keeps what it said.
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < asks.size(); ++i) {
    const AgentRead& a = out.agents[i];
    if (!a.cap || a.failed()) {
      agents_.erase(asks[i].key);
      continue;
    }
    State s{.lid = asks[i].lid, .cap = *a.cap, .refused = st[i]->refused, .recent = std::move(st[i]->recent)};
    for (std::size_t p = 0; p < asks[i].ports.size(); ++p) s.refused[asks[i].ports[p].port_select].add(a.ports[p].refused);
    agents_[asks[i].key] = std::move(s);
  }
  return out;
}

void PmaAgentReader::forget(const std::string& key) {
  std::lock_guard lock(mu_);
  agents_.erase(key);
}

void PmaAgentReader::forget_all() {
  std::lock_guard lock(mu_);
  agents_.clear();
}

void PmaAgentReader::retain(const std::function<bool(const std::string&)>& keep) {
  std::lock_guard lock(mu_);
  std::erase_if(agents_, [&](const auto& kv) { return !keep(kv.first); });
}

PmaAgentReader& local_port_agents() {
  static PmaAgentReader reader(kLocalFreshFor);
  return reader;
}

std::optional<std::uint16_t> PmaAgentReader::known_cap(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = agents_.find(key);
  if (it == agents_.end()) return std::nullopt;
  return it->second.cap;
}

}  // namespace rdma::mad
