#include "sources/cgroup/node_list.h"

#include <nlohmann/json.hpp>

#include "sources/cgroup/pod_list.h"

namespace rdma::cgroup {

bool is_label_value(std::string_view s) {
  if (s.empty()) return true;
  if (s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s)
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

bool is_label_key(std::string_view s) {
  const auto slash = s.find('/');
  const std::string_view name = slash == std::string_view::npos ? s : s.substr(slash + 1);
  if (slash != std::string_view::npos && !is_dns_subdomain(s.substr(0, slash))) return false;
  return !name.empty() && is_label_value(name);
}

std::string decode_node_list(std::string_view text, const std::vector<std::string>& keys, NodeList& out) {
  out = {};
  if (keys.size() > kMaxLabelKeys) return "more than " + std::to_string(kMaxLabelKeys) + " label keys";
  if (text.size() > kMaxNodeListBytes) return "document over " + std::to_string(kMaxNodeListBytes) + " bytes";
  using json = nlohmann::json;
  // Depth-bounded like the pod list: a deeply nested document is refused before it is built.
  std::size_t depth = 0;
  bool too_deep = false;
  const json doc = json::parse(
      text.begin(), text.end(),
      [&](int d, json::parse_event_t, json&) {
        depth = static_cast<std::size_t>(d);
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
      },
      false);
  if (too_deep) return "document nested deeper than " + std::to_string(kMaxDepth);
  if (doc.is_discarded() || !doc.is_object()) return "not a JSON object";
  // Not doc.value("kind", ...): it throws when the member is there but not a string.
  const auto kind = doc.contains("kind") && doc["kind"].is_string() ? doc["kind"].get<std::string>() : std::string();
  if (kind == "Status") {
    const auto code = doc.contains("code") && doc["code"].is_number_unsigned() ? doc["code"].get<std::uint64_t>() : 0;
    std::string msg = doc.contains("message") && doc["message"].is_string() ? doc["message"].get<std::string>() : "";
    for (auto& c : msg)
      if (c < 0x20 || c >= 0x7f) c = '?';
    return "API status " + std::to_string(code) + ": " + msg.substr(0, 200);
  }
  if (kind != "NodeList" && kind != "PartialObjectMetadataList") return "kind is not NodeList";
  if (doc.contains("metadata") && doc["metadata"].is_object()) {
    const auto& m = doc["metadata"];
    if (m.contains("continue") && m["continue"].is_string()) {
      out.next = m["continue"].get<std::string>();
      if (out.next.size() > 4096 || !is_utf8(out.next)) {
        out.next.clear();
        return "metadata.continue is not a bounded UTF-8 token";
      }
    }
  }
  if (!doc.contains("items") || doc["items"].is_null()) return {};
  if (!doc["items"].is_array()) return "items is not a list";
  if (doc["items"].size() > kMaxNodeListItems) return "more than " + std::to_string(kMaxNodeListItems) + " items";
  for (const auto& item : doc["items"]) {
    const json* meta = item.is_object() && item.contains("metadata") && item["metadata"].is_object() ? &item["metadata"] : nullptr;
    if (meta == nullptr || !meta->contains("name") || !(*meta)["name"].is_string() ||
        !is_dns_subdomain((*meta)["name"].get_ref<const std::string&>())) {
      ++out.dropped;
      continue;
    }
    NodeLabels n;
    n.name = (*meta)["name"].get<std::string>();
    const json* labels = meta->contains("labels") && (*meta)["labels"].is_object() ? &(*meta)["labels"] : nullptr;
    for (const auto& key : keys) {
      std::string v;
      if (labels != nullptr && labels->contains(key)) {
        const auto& j = (*labels)[key];
        if (j.is_string() && is_label_value(j.get_ref<const std::string&>()))
          v = j.get<std::string>();
        else
          ++out.dropped;
      }
      n.values.push_back(std::move(v));
    }
    out.nodes.push_back(std::move(n));
  }
  return {};
}

}  // namespace rdma::cgroup
