// YAML helpers shared by every config reader (exporter/options.cpp, web_config.cpp, the
// prober's config): one way to name a position in a file.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace rdma::exporter {

// "origin:line:col" (1-based) of a mark, e.g. of a YAML::Exception; origin alone without one.
// yaml_position(origin, node) in options.h is the same for a node's mark.
std::string yaml_position(const std::string& origin, const YAML::Mark& mark);

// The known-keys rule of every hand-read YAML map (the prober's peers, rails and probe modules):
// the first key of `map` that is not one of `known` (a non-scalar key counts as unknown), for
// the caller's "unknown key" error at its position; nullopt when every key is known.
std::optional<YAML::Node> unknown_key(const YAML::Node& map, std::initializer_list<std::string_view> known);

}  // namespace rdma::exporter
