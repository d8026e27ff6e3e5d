// One discovery of the host's RDMA devices per scrape, shared by every collector, so that
// questions such as "which netdev belongs to mlx5_bond_0" have exactly one answer.
#pragma once

#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "sources/sysfs/read_result.h"

namespace rdma::model {

enum class LinkLayer : std::uint8_t { kUnknown, kInfiniBand, kEthernet };
std::string_view link_layer_label(LinkLayer l);  // "InfiniBand", "Ethernet", "Unknown"

struct NetdevRef {
  std::string name;
  std::string via;  // how it was found: "gid_attrs" (bonds), "bond_slave", "device_net", "parent" (rxe)
  // A bonding master (class/net/<name>/bonding/): its slaves, which carry the port's traffic and
  // have the pause/PFC counters, follow it in the port's netdevs with via "bond_slave".
  bool bond = false;
};

struct PortModel {
  std::uint32_t number = 0;
  std::string number_label;  // "1"
  std::string path;          // <sysfs>/class/infiniband/<dev>/ports/<n>
  LinkLayer link_layer = LinkLayer::kUnknown;
  std::vector<NetdevRef> netdevs;
};

struct DeviceModel {
  std::string name;
  std::string path;    // <sysfs>/class/infiniband/<dev>
  std::string driver;  // "mlx5", "rxe", "bnxt_re", ... or "unknown"
  std::vector<PortModel> ports;
};

// A problem met during discovery, for the scrape's error accounting.
struct DiscoveryIssue {
  std::string path;
  sysfs::ReadError error;
};

struct HostModel {
  std::string sysfs_root;
  std::vector<DeviceModel> devices;
  std::vector<DiscoveryIssue> issues;
  std::vector<std::string> excluded;  // device names dropped by the include/exclude filters
};

struct DiscoveryOptions {
  std::string sysfs_root = "/sys";
  std::string device_include;  // regex, empty = all
  std::string device_exclude;  // regex, empty = none
};

class Discoverer {
 public:
  explicit Discoverer(DiscoveryOptions opts);  // throws std::regex_error on bad patterns
  std::shared_ptr<const HostModel> discover() const;

 private:
  bool selected(const std::string& device) const;
  DiscoveryOptions opts_;
  std::regex include_;
  std::regex exclude_;
};

// Maps the kernel driver of the parent device (device/driver link) or the device name to the
// RDMA provider name. Data, not branches: see the table in host_model.cpp.
std::string driver_from(const std::string& device_name, const std::string& parent_driver, bool has_parent_attr);

}  // namespace rdma::model
