// One discovery of the host's RDMA devices per scrape, shared by every collector, so that
// questions such as "which netdev belongs to mlx5_bond_0" have exactly one answer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "sources/common/result.h"
#include "sources/sysfs/reader.h"

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
  // The directory's identity as this scrape's discovery stat'ed it, where the device's walk is
  // trusted (its directories still for the racy window): a reader that keeps the directory open
  // compares this instead of stat'ing the path again. Unset otherwise.
  std::optional<sysfs::DirIdentity> identity;
};

struct DeviceModel {
  std::string name;
  std::string path;    // <sysfs>/class/infiniband/<dev>
  std::string driver;  // "mlx5", "rxe", "bnxt_re", ... or "unknown"
  std::vector<PortModel> ports;
  std::optional<sysfs::DirIdentity> identity;  // as PortModel::identity
};

// A problem met during discovery, for the scrape's error accounting.
struct DiscoveryIssue {
  std::string path;
  ReadError error;
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
  // How long a directory must have been still before its walk is reused; tests, which set the
  // directories' times themselves, use 0.
  int racy_seconds = sysfs::KeptDir::kRacySeconds;
};

// What a device is for its lifetime (its ports, their link layers, its driver) is walked once
// and kept while the device's directory, its ports/ and each port's directory keep their identity
// (sysfs::DirIdentity: a device registered again is a new directory) and have been still for
// sysfs::KeptDir::kRacySeconds; a device whose walk met a problem is walked again at each scrape.
// The netdevs can change under a live device (bonds, renames, RoCE GID bindings): they are
// resolved at every scrape, from device/net's listing kept with the walk while the directory and
// each entry keep their identity; where nothing of that changed, the last scrape's model is
// returned again. Thread-safe.
class Discoverer {
 public:
  explicit Discoverer(DiscoveryOptions opts);  // throws std::regex_error on bad patterns
  std::shared_ptr<const HostModel> discover() const;

 private:
  struct Walked;
  bool selected(const std::string& device) const;
  DiscoveryOptions opts_;
  std::regex include_;
  std::regex exclude_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const Walked>> walked_;  // by device name
  // The last model built; returned again while every device's walk and device/net listing are
  // reused and no port's netdevs are read at each scrape (RoCE: gid_attrs/ndevs and bond slaves).
  mutable std::shared_ptr<const HostModel> last_;
};

// Maps the kernel driver of the parent device (device/driver link) or the device name to the
// RDMA provider name. Data, not branches: see the table in host_model.cpp.
std::string driver_from(const std::string& device_name, const std::string& parent_driver, bool has_parent_attr);

}  // namespace rdma::model
