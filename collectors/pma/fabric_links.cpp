#include "collectors/pma/fabric_links.h"

#include <cstdlib>
#include <set>
#include <tuple>
#include <utility>

#include "collectors/pma/fabric.h"

namespace rdma::collectors::pma {

namespace {
// Switch ends first, then by GUID and port: each link gets one orientation, whichever end it was found from.
bool before(const LinkTable::End& x, const LinkTable::End& y) {
  return std::make_tuple(!x.is_switch, x.guid, x.port) < std::make_tuple(!y.is_switch, y.guid, y.port);
}
double unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}
}  // namespace

void LinkTable::observe(const std::shared_ptr<const Topology>& topo, std::chrono::system_clock::time_point now) {
  if (!topo || topo == seen_) return;
  seen_ = topo;
  std::map<Key, Link> current;
  std::set<std::pair<std::string, int>> cabled;  // every port end of a link up now
  for (const FabricNode& n : topo->nodes)
    for (const FabricPort& fp : n.ports) {
      End here{n.guid_label, n.name, fp.number, n.type == "switch"};
      const FabricNode* far = topo->find(fp.remote_guid_value);
      End there{fp.remote_guid, fp.remote_name, std::atoi(fp.remote_port.c_str()), far && far->type == "switch"};
      cabled.emplace(here.guid, here.port);
      Link l;
      l.up = true;
      l.last_seen_up = now;
      if (fp.info && fp.remote_info) l.training = mad::link_training(*fp.info, *fp.remote_info);
      if (before(here, there)) {
        l.a = std::move(here), l.b = std::move(there);
      } else {
        l.a = std::move(there), l.b = std::move(here);
      }
      Key k{l.a.guid, l.a.port, l.b.guid, l.b.port};
      current.emplace(std::move(k), std::move(l));  // each link comes from both ends: the first wins
    }
  for (auto it = links_.begin(); it != links_.end();) {
    Link& old = it->second;
    if (current.count(it->first)) {
      ++it;
      continue;
    }
    if (old.up) {
      ++c_->disappeared;
      old.up = false;
      old.training.reset();
    }
    const bool recabled = cabled.count({old.a.guid, old.a.port}) || cabled.count({old.b.guid, old.b.port});
    if (recabled || now - old.last_seen_up > retention_) it = links_.erase(it);
    else ++it;
  }
  for (auto& [k, l] : current) {
    auto it = links_.find(k);
    if (it == links_.end() || !it->second.up) c_->appeared += first_ ? 0 : 1;
    links_[k] = std::move(l);
  }
  first_ = false;
}

void LinkTable::emit(exporter::MetricSink& out) const {
  std::uint64_t up = 0, down = 0, degraded = 0;
  for (const auto& [k, l] : links_) {
    const exporter::Labels id{{"node_guid", l.a.guid}, {"port", std::to_string(l.a.port)},
                              {"remote_guid", l.b.guid}, {"remote_port", std::to_string(l.b.port)}};
    exporter::Labels info = id;
    info.emplace_back("node_name", l.a.name);
    info.emplace_back("remote_name", l.b.name);
    out.info("rdma_pma_fabric_link_info",
             "A fabric link, once: both ends (node GUID, port, name), the switch end as node_*. Kept after the link "
             "went down until one of its ports is cabled elsewhere or the link retention passes.",
             std::move(info));
    out.gauge_u64("rdma_pma_fabric_link_up", "1 when the last discovery saw the link, 0 for a link last seen earlier.",
                  id, l.up ? 1 : 0);
    out.gauge("rdma_pma_fabric_link_last_seen_up_timestamp_seconds",
              "Unix time of the last discovery that saw the link up.", id, unix_seconds(l.last_seen_up));
    l.up ? ++up : ++down;
    if (!l.training) continue;
    const auto& t = *l.training;
    exporter::Labels d = id;
    d.emplace_back("active_width", std::string(t.active_width.name));
    d.emplace_back("possible_width", std::string(t.possible_width.name));
    d.emplace_back("active_speed", std::string(t.active_speed.name));
    d.emplace_back("possible_speed", std::string(t.possible_speed.name));
    out.gauge_u64("rdma_pma_fabric_link_degraded",
                  "1 when the link trained below the best width and speed both ends support and one enables "
                  "(PortInfo of both ends at the last discovery); active and possible values as labels.",
                  std::move(d), t.degraded() ? 1 : 0);
    degraded += t.degraded();
  }
  out.gauge_u64("rdma_pma_fabric_links", "Fabric links by state: up (last discovery) or down (last-known, retained).",
                {{"state", "up"}}, up);
  out.gauge_u64("rdma_pma_fabric_links", "Fabric links by state: up (last discovery) or down (last-known, retained).",
                {{"state", "down"}}, down);
  out.gauge_u64("rdma_pma_fabric_links_degraded", "Links up that trained below what both ends could do.", {}, degraded);
  out.counter("rdma_pma_fabric_link_changes_total",
              "Links that appeared or disappeared between two discoveries (the first discovery is the baseline).",
              {{"change", "appeared"}}, c_->appeared);
  out.counter("rdma_pma_fabric_link_changes_total",
              "Links that appeared or disappeared between two discoveries (the first discovery is the baseline).",
              {{"change", "disappeared"}}, c_->disappeared);
}

}  // namespace rdma::collectors::pma
