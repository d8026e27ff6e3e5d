#include "sources/ethtool/ethtool_ioctl.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rdma::ethtool {
namespace {

static_assert(kStringLength == ETH_GSTRING_LEN);

// The kernel writes as many entries as the driver has *now*, whatever the caller allocated;
// this slack absorbs a table that grew between GSSET_INFO and GSTRINGS/GSTATS.
constexpr std::size_t kSlackEntries = 256;

// A heap buffer aligned for the u64 fields of the ethtool structs.
struct Buffer {
  explicit Buffer(std::size_t bytes) : words((bytes + 7) / 8 + 1, 0) {}
  void* data() { return words.data(); }
  std::vector<std::uint64_t> words;
};

}  // namespace

std::vector<std::string> decode_strings(std::span<const std::uint8_t> data, std::size_t count) {
  std::vector<std::string> out;
  const std::size_t n = std::min(count, data.size() / kStringLength);
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* p = reinterpret_cast<const char*>(data.data() + i * kStringLength);
    out.emplace_back(p, strnlen(p, kStringLength));
  }
  return out;
}

IoctlClient::~IoctlClient() {
  if (fd_ >= 0) ::close(fd_);
}

Result<unsigned> IoctlClient::ifindex(const std::string& ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return Result<unsigned>::failure(ReadError::kInvalid, EINVAL);
  unsigned idx = if_nametoindex(ifname.c_str());
  if (idx == 0) return Result<unsigned>::failure(errno == ENODEV || errno == ENXIO ? ReadError::kNotFound : classify_errno(errno), errno);
  return Result<unsigned>::success(idx);
}

int IoctlClient::call(const std::string& ifname, void* data) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return EINVAL;
  if (fd_ < 0) {
    // Any socket carries SIOCETHTOOL; AF_UNIX works where IPv4 is compiled out.
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return errno;
  }
  struct ifreq ifr {};
  std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
  ifr.ifr_data = static_cast<char*>(data);
  return ::ioctl(fd_, SIOCETHTOOL, &ifr) < 0 ? errno : 0;
}

Result<std::string> IoctlClient::driver(const std::string& ifname) {
  ethtool_drvinfo info{};
  info.cmd = ETHTOOL_GDRVINFO;
  if (int err = call(ifname, &info)) return Result<std::string>::failure(classify_errno(err), err);
  return Result<std::string>::success(std::string(info.driver, strnlen(info.driver, sizeof info.driver)));
}

Result<std::size_t> IoctlClient::stats_count(const std::string& ifname) {
  Buffer buf(sizeof(ethtool_sset_info) + sizeof(std::uint32_t));
  auto* info = static_cast<ethtool_sset_info*>(buf.data());
  info->cmd = ETHTOOL_GSSET_INFO;
  info->sset_mask = 1ULL << ETH_SS_STATS;
  if (int err = call(ifname, info)) return Result<std::size_t>::failure(classify_errno(err), err);
  if (!(info->sset_mask & (1ULL << ETH_SS_STATS))) return Result<std::size_t>::failure(ReadError::kNotSupported, EOPNOTSUPP);
  std::uint32_t n = 0;
  std::memcpy(&n, reinterpret_cast<const char*>(info) + sizeof(ethtool_sset_info), sizeof n);
  return Result<std::size_t>::success(n);
}

Result<std::vector<std::string>> IoctlClient::stat_names(const std::string& ifname, std::size_t count) {
  using R = Result<std::vector<std::string>>;
  Buffer buf(sizeof(ethtool_gstrings) + (count + kSlackEntries) * kStringLength);
  auto* gs = static_cast<ethtool_gstrings*>(buf.data());
  gs->cmd = ETHTOOL_GSTRINGS;
  gs->string_set = ETH_SS_STATS;
  gs->len = static_cast<std::uint32_t>(count);
  if (int err = call(ifname, gs)) return R::failure(classify_errno(err), err);
  if (gs->len != count) return R::failure(ReadError::kInvalid, 0);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(gs) + sizeof(ethtool_gstrings);
  return R::success(decode_strings({bytes, count * kStringLength}, count));
}

Result<std::vector<std::uint64_t>> IoctlClient::stat_values(const std::string& ifname, std::size_t count) {
  using R = Result<std::vector<std::uint64_t>>;
  Buffer buf(sizeof(ethtool_stats) + (count + kSlackEntries) * sizeof(std::uint64_t));
  auto* st = static_cast<ethtool_stats*>(buf.data());
  st->cmd = ETHTOOL_GSTATS;
  st->n_stats = static_cast<std::uint32_t>(count);
  if (int err = call(ifname, st)) return R::failure(classify_errno(err), err);
  if (st->n_stats != count) return R::failure(ReadError::kInvalid, 0);
  std::vector<std::uint64_t> out(count);
  std::memcpy(out.data(), reinterpret_cast<const char*>(st) + sizeof(ethtool_stats), count * sizeof(std::uint64_t));
  return R::success(std::move(out));
}

}  // namespace rdma::ethtool
