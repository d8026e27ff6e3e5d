// Helpers for the netdev tests: temp sysfs trees, netlink message construction with libmnl (the
// messages the kernel would send); sample lookup is tests/lib/samples.h.
#pragma once

#include <libmnl/libmnl.h>
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

// Builds one netlink message: header type, a fixed extra header, then attributes.
class MessageBuilder {
 public:
  MessageBuilder(std::uint16_t type, const void* extra, std::size_t extra_len) : buf_(MNL_SOCKET_BUFFER_SIZE) {
    nlh_ = mnl_nlmsg_put_header(buf_.data());
    nlh_->nlmsg_type = type;
    void* e = mnl_nlmsg_put_extra_header(nlh_, extra_len);
    std::memcpy(e, extra, extra_len);
  }
  nlmsghdr* nlh() { return nlh_; }
  std::vector<std::uint8_t> bytes() const {
    return {buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(nlh_->nlmsg_len)};
  }

 private:
  std::vector<std::uint8_t> buf_;
  nlmsghdr* nlh_;
};

// An NLMSG_ERROR carrying -err.
inline std::vector<std::uint8_t> error_message(int err) {
  nlmsgerr e{};
  e.error = -err;
  MessageBuilder b(NLMSG_ERROR, &e, sizeof e);
  return b.bytes();
}

// A GSTRINGS data block: names padded to 32 bytes (a 32-byte name has no NUL).
inline std::vector<std::uint8_t> string_block(const std::vector<std::string>& names) {
  std::vector<std::uint8_t> out(names.size() * 32, 0);
  for (std::size_t i = 0; i < names.size(); ++i) std::memcpy(out.data() + i * 32, names[i].data(), std::min<std::size_t>(32, names[i].size()));
  return out;
}

}  // namespace ndtest
