#include "sources/model/suspect_links.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace rdma::model {
namespace {

bool answered(const std::string& hop) { return !hop.empty() && hop != kUnansweredHop; }

// What one lossy flow could be blamed on: its narrowed link, or every link of its path, less the
// links clean flows cross.
struct Candidates {
  std::set<HopLink> links;
  bool narrowed = false;
  const std::string* id = nullptr;
};

// Whether the fresh trace is the known path, cut short or not: the same hop at every position
// both answered. One that differs (the path changed: a hop more or less, another router) or
// goes further is a new path, never read as a shortened old one.
bool fresh_on_path(const TracedFlow& f) {
  for (std::size_t i = 0; i < f.fresh_path.size(); ++i) {
    if (!answered(f.fresh_path[i])) continue;
    if (i >= f.path.size() || (answered(f.path[i]) && f.fresh_path[i] != f.path[i])) return false;
  }
  return true;
}

std::optional<std::size_t> last_answered(const std::vector<std::string>& hops) {
  auto last = std::find_if(hops.rbegin(), hops.rend(), answered);
  if (last == hops.rend()) return std::nullopt;
  return static_cast<std::size_t>(hops.rend() - last) - 1;
}

// Whether the fresh trace passed: it reached the destination, or answered along the known path as
// far as the clean trace did. Its packets hash as the flow's, so every link up to there carried
// the flow's 5-tuple after the flow turned lossy: the loss is on the way back (the answers' path,
// which this side does not trace), at the far end, or too intermittent for one packet per hop to
// meet. Either way no link this side traced is supported by the flow.
bool fresh_passed(const TracedFlow& f) {
  if (f.fresh_complete) return true;
  if (f.fresh_path.empty() || !fresh_on_path(f)) return false;
  auto fresh = last_answered(f.fresh_path), known = last_answered(f.path);
  return fresh && known && *fresh >= *known;
}

// The link after the fresh trace's last answered hop, when the fresh trace stopped early on the
// flow's known path.
std::optional<HopLink> narrowed_link(const TracedFlow& f) {
  if (f.fresh_complete || f.fresh_path.empty() || !fresh_on_path(f)) return std::nullopt;
  auto last = last_answered(f.fresh_path);
  if (!last) return std::nullopt;
  const std::size_t k = *last;
  if (k + 1 >= f.path.size()) return std::nullopt;
  const auto& at = f.path[k];
  const auto& next = f.path[k + 1];
  if (!answered(next) || next == at) return std::nullopt;
  return HopLink{at, next};
}

Candidates candidates(const TracedFlow& f, const std::set<HopLink>& clean) {
  Candidates c;
  c.id = &f.id;
  if (fresh_passed(f)) return c;
  if (auto n = narrowed_link(f); n && !clean.contains(*n)) {
    c.links.insert(*n);
    c.narrowed = true;
    return c;
  }
  // A stop on a link clean flows use says nothing (ICMP rate limits, a 5-tuple the drop spares):
  // the whole path stays in question. A fresh trace on a new path that stopped early names
  // nothing: the links it answered across passed its packets, and what lies after its stop is
  // unknown (the old path is not it).
  if (!f.fresh_path.empty() && !fresh_on_path(f)) return c;
  for (auto& l : path_links(f.path))
    if (!clean.contains(l)) c.links.insert(l);
  return c;
}

void cover_group(const std::string& group, const std::vector<const TracedFlow*>& flows, const SuspectSettings& s,
                 std::vector<SuspectLink>& out) {
  std::set<HopLink> clean;
  std::map<HopLink, std::size_t> clean_count;
  for (auto* f : flows)
    if (!f->lossy)
      for (auto& l : path_links(f->path)) {
        clean.insert(l);
        ++clean_count[l];
      }
  std::vector<Candidates> lossy;
  for (auto* f : flows)
    if (f->lossy)
      if (auto c = candidates(*f, clean); !c.links.empty()) lossy.push_back(std::move(c));

  std::vector<bool> explained(lossy.size(), false);
  std::size_t chosen = 0;
  while (chosen < s.max_suspects_per_group) {
    std::map<HopLink, std::size_t> votes;
    for (std::size_t i = 0; i < lossy.size(); ++i)
      if (!explained[i])
        for (auto& l : lossy[i].links) ++votes[l];
    if (votes.empty()) break;
    std::size_t best = 0;
    for (auto& [l, n] : votes) best = std::max(best, n);
    for (auto& [l, n] : votes) {
      if (n != best || chosen == s.max_suspects_per_group) continue;
      SuspectLink sl{group, l, 0, clean_count[l], false, {}};
      for (std::size_t i = 0; i < lossy.size(); ++i)
        if (lossy[i].links.contains(l)) {
          ++sl.lossy_flows;
          sl.lossy_ids.push_back(*lossy[i].id);
          sl.narrowed = sl.narrowed || lossy[i].narrowed;
          explained[i] = true;
        }
      out.push_back(std::move(sl));
      ++chosen;
    }
  }
}

}  // namespace

std::vector<HopLink> path_links(const std::vector<std::string>& path) {
  std::vector<HopLink> links;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    const auto& a = path[i];
    const auto& b = path[i + 1];
    if (!answered(a) || !answered(b) || a == b) continue;
    HopLink l{a, b};
    if (std::find(links.begin(), links.end(), l) == links.end()) links.push_back(std::move(l));
  }
  return links;
}

std::vector<SuspectLink> suspect_links(const std::vector<TracedFlow>& flows, const SuspectSettings& s) {
  std::map<std::string, std::vector<const TracedFlow*>> groups;
  for (auto& f : flows) groups[f.group].push_back(&f);
  std::vector<SuspectLink> out;
  for (auto& [group, members] : groups) {
    auto first = out.size();
    cover_group(group, members, s, out);
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), [](auto& a, auto& b) {
      if (a.lossy_flows != b.lossy_flows) return a.lossy_flows > b.lossy_flows;
      return a.link < b.link;
    });
  }
  return out;
}

}  // namespace rdma::model
