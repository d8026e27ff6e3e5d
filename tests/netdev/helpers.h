// Helpers for the netdev tests: temp sysfs trees, netlink error replies (built with
// netlink::build_request, as the kernel would send them); sample lookup is tests/lib/samples.h.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "exporter/metrics.h"
#include "sources/netlink/message.h"
#include "tests/lib/samples.h"
#include "tests/lib/temp_tree.h"

namespace ndtest {

namespace fs = std::filesystem;
using rdma::exporter::Labels;
using rdma::exporter::MetricSink;
using rdma::exporter::MetricType;

using rdma::testing::count;
using rdma::testing::find;
using rdma::testing::Found;

// The labels of one port's netdev, and those plus more.
inline const Labels kBase{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "ens1f0np0"}};
inline Labels with(std::initializer_list<std::pair<const char*, const char*>> extra) {
  Labels l = kBase;
  for (auto [k, v] : extra) l.emplace_back(k, v);
  return l;
}

using TempTree = rdma::testing::TempTree;

// An NLMSG_ERROR carrying -err.
inline std::vector<std::uint8_t> error_message(int err) {
  nlmsgerr e{};
  e.error = -err;
  return rdma::netlink::build_request(NLMSG_ERROR, &e, sizeof e);
}

// A GSTRINGS data block: names padded to 32 bytes (a 32-byte name has no NUL).
inline std::vector<std::uint8_t> string_block(const std::vector<std::string>& names) {
  std::vector<std::uint8_t> out(names.size() * 32, 0);
  for (std::size_t i = 0; i < names.size(); ++i) std::memcpy(out.data() + i * 32, names[i].data(), std::min<std::size_t>(32, names[i].size()));
  return out;
}

}  // namespace ndtest
