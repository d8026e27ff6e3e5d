#include "sources/model/probe_links.h"

#include <algorithm>
#include <tuple>

namespace rdma::model {

void IbProbeLinkBoard::publish(std::vector<IbProbeLink> links, Clock::duration stale_after, Clock::time_point now) {
  auto v = std::make_shared<IbProbeLinksView>();
  std::erase_if(links, [](const IbProbeLink& l) { return l.dst_lid == 0; });
  auto key = [](const IbProbeLink& l) { return std::tie(l.device, l.port, l.dst_lid); };
  std::sort(links.begin(), links.end(), [&](const IbProbeLink& a, const IbProbeLink& b) { return key(a) < key(b); });
  for (IbProbeLink& l : links) {
    if (!v->links.empty() && key(v->links.back()) == key(l)) {
      v->links.back().judged_flows += l.judged_flows;
      v->links.back().lossy_flows += l.lossy_flows;
    } else if (v->links.size() < kMaxLinks) {
      v->links.push_back(std::move(l));
    } else {
      ++v->dropped;
    }
  }
  std::lock_guard lock(mu_);
  view_ = std::move(v);
  stale_at_ = now + stale_after;
}

void IbProbeLinkBoard::clear() {
  std::lock_guard lock(mu_);
  view_.reset();
}

std::shared_ptr<const IbProbeLinksView> IbProbeLinkBoard::view(Clock::time_point now) const {
  static const auto empty = std::make_shared<const IbProbeLinksView>();
  std::lock_guard lock(mu_);
  return view_ && now < stale_at_ ? view_ : empty;
}

IbProbeLinkBoard& ib_probe_links() {
  static IbProbeLinkBoard board;
  return board;
}

}  // namespace rdma::model
