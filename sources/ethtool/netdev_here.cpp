#include "sources/ethtool/netdev_here.h"

#include "sources/ethtool/ethtool_ioctl.h"
#include "sources/sysfs/reader.h"

namespace rdma::ethtool {

NetdevHere netdev_here(const std::string& sysfs_root, const std::string& name) {
  const auto kernel = IoctlClient::ifindex(name);
  const auto tree = sysfs::read_u64(sysfs_root + "/class/net/" + name + "/ifindex");
  using S = NetdevHere::State;
  if (tree) {
    if (kernel && kernel.value == tree.value) return {S::kHere, kernel.value};
    return {S::kElsewhere, 0};
  }
  // A tree that does not give the ifindex is taken at its word.
  if (kernel) return {S::kHere, kernel.value};
  return {S::kMissing, 0};
}

}  // namespace rdma::ethtool
