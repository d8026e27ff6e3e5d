// Whether the netdev a sysfs tree names is the one this network namespace has under that name.
// ethtool, dcbnl and the module EEPROM act on a netdev by name in the exporter's namespace, while
// the names come from the tree under --path.sysfs: a fake one (the demo, fixtures) or another
// namespace's /sys may name netdevs this kernel does not have, or has under the same name (eth0)
// as another device. The one test every reader by name applies: the same ifindex.
#pragma once

#include <string>

namespace rdma::ethtool {

struct NetdevHere {
  enum class State {
    kHere,       // this namespace's netdev: the tree's ifindex is the kernel's, or the tree has none
    kElsewhere,  // the tree gives an ifindex this namespace does not have under the name
    kMissing,    // the tree gives no ifindex and this namespace has no netdev of the name
  };
  State state = State::kMissing;
  unsigned ifindex = 0;  // kHere: the kernel's
  bool here() const { return state == State::kHere; }
};

// <sysfs_root>/class/net/<name>/ifindex against if_nametoindex(name).
NetdevHere netdev_here(const std::string& sysfs_root, const std::string& name);

}  // namespace rdma::ethtool
