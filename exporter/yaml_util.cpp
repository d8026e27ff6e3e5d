#include "exporter/yaml_util.h"

#include <algorithm>

#include "exporter/options.h"

namespace rdma::exporter {

std::string yaml_position(const std::string& origin, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return origin;
  return origin + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string yaml_position(const std::string& file, const YAML::Node& node) { return yaml_position(file, node.Mark()); }

std::optional<YAML::Node> unknown_key(const YAML::Node& map, std::initializer_list<std::string_view> known) {
  if (!map.IsMap()) return std::nullopt;
  for (const auto& kv : map) {
    const auto k = kv.first.IsScalar() ? kv.first.as<std::string>("") : std::string();
    if (std::find(known.begin(), known.end(), k) == known.end()) return kv.first;
  }
  return std::nullopt;
}

}  // namespace rdma::exporter
