// SIOCETHTOOL client: driver name (ETHTOOL_GDRVINFO), the statistics string table
// (ETHTOOL_GSSET_INFO + ETHTOOL_GSTRINGS) and the values (ETHTOOL_GSTATS) of one netdev in the
// exporter's network namespace. Errors are values (ENODEV = netdev absent, EOPNOTSUPP = driver
// without statistics); nothing here knows Prometheus.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sources/common/result.h"

namespace rdma::ethtool {

inline constexpr std::size_t kStringLength = 32;  // ETH_GSTRING_LEN

// Pure: the names in an ETHTOOL_GSTRINGS data block (count entries of 32 bytes, NUL-padded; a
// name that fills all 32 bytes has no NUL). Entries beyond the data are not invented.
std::vector<std::string> decode_strings(std::span<const std::uint8_t> data, std::size_t count);

class IoctlClient {
 public:
  IoctlClient() = default;
  ~IoctlClient();
  IoctlClient(const IoctlClient&) = delete;
  IoctlClient& operator=(const IoctlClient&) = delete;

  // Interface index in this network namespace; kNotFound when there is no such netdev.
  static Result<unsigned> ifindex(const std::string& ifname);
  // ETHTOOL_GDRVINFO driver name ("mlx5_core", "bnxt_en", "ice", "veth").
  Result<std::string> driver(const std::string& ifname);
  // Number of ETH_SS_STATS entries (ETHTOOL_GSSET_INFO); kNotSupported when the set is absent.
  Result<std::size_t> stats_count(const std::string& ifname);
  // ETHTOOL_GSTRINGS for ETH_SS_STATS; the result has exactly `count` names or an error
  // (kInvalid when the kernel's table changed size meanwhile).
  Result<std::vector<std::string>> stat_names(const std::string& ifname, std::size_t count);
  // ETHTOOL_GSTATS; exactly `count` values or kInvalid when the table changed size meanwhile.
  Result<std::vector<std::uint64_t>> stat_values(const std::string& ifname, std::size_t count);

 private:
  int call(const std::string& ifname, void* data);  // 0 or an errno
  int fd_ = -1;
};

}  // namespace rdma::ethtool
