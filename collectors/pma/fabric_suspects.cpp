#include "collectors/pma/fabric_suspects.h"

#include <set>

#include "collectors/pma/fabric.h"
#include "exporter/query.h"
#include "exporter/text.h"

namespace rdma::collectors::pma {

IbSuspects ib_suspects(const Topology& topo, const ForwardingTables& t, const std::vector<PairLoss>& pairs,
                       const model::SuspectSettings& s) {
  IbSuspects out;
  std::vector<model::TracedFlow> flows;
  std::set<model::HopLink> cables;
  std::set<std::string> adaptive_groups;
  for (const PairLoss& p : pairs) {
    const std::string id = mad::guid_label(p.src_guid) + "/" + std::to_string(p.src_port) + "-" + std::to_string(p.dst_lid);
    const Route r = compute_route(topo, t, p.src_guid, p.src_port, p.dst_lid);
    if (!r.ok()) {
      out.unrouted.push_back(id + ": " + std::string(route_error_name(r.error)) + ": " + r.detail);
      continue;
    }
    for (const RouteCable& c : route_cables(r)) cables.insert({c.from, c.to});
    if (r.adaptive_hops()) adaptive_groups.insert(p.group);
    model::TracedFlow f;
    f.group = p.group;
    f.id = id;
    f.lossy = p.lossy;
    f.path = route_ports(r);
    flows.push_back(std::move(f));
  }
  for (model::SuspectLink& l : model::suspect_links(flows, s))
    if (cables.count(l.link)) {
      out.adaptive.push_back(adaptive_groups.count(l.group) > 0);
      out.suspects.push_back(std::move(l));
    }
  return out;
}

std::string suspects_json(const IbSuspects& s) {
  std::string out = "{\"suspects\":[";
  for (std::size_t i = 0; i < s.suspects.size(); ++i) {
    const auto& l = s.suspects[i];
    out += i ? ",\n" : "\n";
    out += "{\"group\":";
    exporter::append_json_string(out, l.group);
    out += ",\"from\":";
    exporter::append_json_string(out, l.link.from);
    out += ",\"to\":";
    exporter::append_json_string(out, l.link.to);
    out += ",\"lossy_flows\":" + std::to_string(l.lossy_flows) + ",\"clean_flows\":" + std::to_string(l.clean_flows) +
           ",\"adaptive_routing\":" + (i < s.adaptive.size() && s.adaptive[i] ? "true" : "false") + "}";
  }
  out += "\n],\"unrouted\":[";
  for (std::size_t i = 0; i < s.unrouted.size(); ++i) {
    out += i ? "," : "";
    exporter::append_json_string(out, s.unrouted[i]);
  }
  out += "]}\n";
  return out;
}

std::optional<std::vector<PairLoss>> parse_pairs(std::string_view list, bool lossy) {
  std::vector<PairLoss> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (comma != std::string_view::npos && list.empty()) return std::nullopt;  // a trailing comma
    const auto slash = item.find('/'), dash = item.find('-');
    if (slash == std::string_view::npos || dash == std::string_view::npos || dash < slash) return std::nullopt;
    const auto guid = exporter::query_guid(item.substr(0, slash));
    const auto port = exporter::query_number(item.substr(slash + 1, dash - slash - 1), 1, 254);
    const auto lid = exporter::query_number(item.substr(dash + 1), 1, mad::kMaxUnicastLid);
    if (!guid || !port || !lid) return std::nullopt;
    PairLoss p;
    p.lossy = lossy;
    p.src_guid = *guid;
    p.src_port = static_cast<std::uint8_t>(*port);
    p.dst_lid = static_cast<std::uint16_t>(*lid);
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<std::string> FabricLoop::route_suspects_json(const std::vector<PairVerdict>& pairs) const {
  const std::shared_ptr<const ForwardingTables> t = lft_.tables();
  if (!t || !t->topology) return std::nullopt;
  std::vector<PairLoss> in;
  in.reserve(pairs.size());
  for (const PairVerdict& p : pairs) in.push_back({p.src_guid, p.src_port, p.dst_lid, p.lossy, ""});
  return suspects_json(ib_suspects(*t->topology, *t, in));
}

}  // namespace rdma::collectors::pma
