#include "collectors/prober/wire/pending_admission.h"

#include <algorithm>
#include <tuple>

#include "collectors/prober/wire/handshake_io.h"

namespace rdma::collectors::prober {

Gid source_prefix(const Gid& address) {
  Gid p = address;
  if (v4_mapped(address.data())) p[15] = 0;  // ::ffff:a.b.c.0: the IPv4 /24
  else std::fill(p.begin() + 8, p.end(), std::uint8_t{0});
  return p;
}

std::size_t PendingAdmission::from_prefix(const Gid& source) const {
  auto it = by_prefix_.find(source_prefix(source));
  return it == by_prefix_.end() ? 0 : it->second;
}

std::size_t PendingAdmission::from_source(const Gid& source) const {
  auto it = by_source_.find(source);
  return it == by_source_.end() ? 0 : it->second;
}

void PendingAdmission::forget(std::map<Id, Entry>::iterator it) {
  if (auto p = by_prefix_.find(it->second.prefix); p != by_prefix_.end() && --p->second == 0) by_prefix_.erase(p);
  if (auto s = by_source_.find(it->second.source); s != by_source_.end() && --s->second == 0) by_source_.erase(s);
  entries_.erase(it);
}

void PendingAdmission::remove(Id id) {
  if (auto it = entries_.find(id); it != entries_.end()) forget(it);
}

PendingAdmission::Admitted PendingAdmission::admit(const Gid& source) {
  Admitted a;
  const Gid prefix = source_prefix(source);
  auto victim = entries_.end();
  if (from_source(source) >= limits_.per_source) {
    // The address's own oldest: a source at its bound only replaces itself.
    victim = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.second.source == source; });
    a.reason = "pending_per_source";
  } else if (entries_.size() >= std::max<std::size_t>(limits_.total, 1)) {
    // The busiest prefix counting the newcomer, then its busiest address, then the oldest: the
    // first maximum in id order is the oldest of the ties. A table of a few thousand entries at
    // most, scanned once per accept beyond the bound.
    auto load = [&](const Entry& e) {
      return std::make_tuple(by_prefix_[e.prefix] + (e.prefix == prefix), by_source_[e.source] + (e.source == source));
    };
    std::tuple<std::size_t, std::size_t> best{0, 0};
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (auto l = load(it->second); l > best) best = l, victim = it;
    a.reason = "pending_total";
  }
  if (victim != entries_.end()) {
    a.evict = victim->first;
    forget(victim);
  }
  a.id = next_++;
  entries_.emplace(a.id, Entry{source, prefix});
  ++by_prefix_[prefix];
  ++by_source_[source];
  return a;
}

}  // namespace rdma::collectors::prober
