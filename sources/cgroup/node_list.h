// The Kubernetes API server's NodeList JSON (GET /api/v1/nodes, or its metadata-only form
// PartialObjectMetadataList) -> each node's name and the values of a few labels (the prober's
// topology plan: NVIDIA Topograph's network.topology.nvidia.com/{accelerator,leaf,spine,core},
// the keys being settings). Pure (no I/O), unit-tested and fuzzed on bytes.
//
// Hostile input: the document is bounded in size and items, must be valid UTF-8 JSON; a node
// name must be a DNS-1123 subdomain and a label value what the API server admits (at most 63 of
// [A-Za-z0-9_.-], alphanumeric at both ends): an item that is not is dropped (counted), a label
// value that is not is read as absent (counted). metadata.continue (a page's token) is kept for
// the next request.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rdma::cgroup {

inline constexpr std::size_t kMaxNodeListBytes = 32u << 20;  // one page
inline constexpr std::size_t kMaxNodeListItems = 10000;      // one page
inline constexpr std::size_t kMaxLabelKeys = 8;

struct NodeLabels {
  std::string name;
  std::vector<std::string> values;  // one per asked key, "" when absent or not valid
};

struct NodeList {
  std::vector<NodeLabels> nodes;
  std::string next;          // metadata.continue: "" on the last page
  std::size_t dropped = 0;   // items without a valid name, and label values not valid
};

// Decodes `json`, reading the labels `keys` (at most kMaxLabelKeys). Returns "" on success, else
// what was wrong (printable ASCII, bounded); an API "Status" object is reported with its code.
std::string decode_node_list(std::string_view json, const std::vector<std::string>& keys, NodeList& out);

// A label value as the API server admits it ("" included: an empty value).
bool is_label_value(std::string_view s);

// A label key as the API server admits it: an optional DNS-subdomain prefix and '/', then a name
// of 1 to 63 characters shaped like a label value ("network.topology.nvidia.com/leaf").
bool is_label_key(std::string_view s);

}  // namespace rdma::cgroup
