#include "sources/model/host_model.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "sources/sysfs/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::model {
namespace {

// Kernel driver of the parent device -> RDMA provider.
constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kParentDriverToProvider{{
    {"mlx5_core", "mlx5"}, {"mlx4_core", "mlx4"}, {"bnxt_en", "bnxt_re"}, {"ice", "irdma"},
    {"i40e", "i40iw"}, {"idpf", "irdma"}, {"efa", "efa"}, {"hfi1", "hfi1"}, {"ib_qib", "qib"},
    {"mana", "mana"}, {"erdma", "erdma"}, {"hns3", "hns"},
}};
// Device-name prefix -> provider, for devices whose parent driver says nothing (or is absent).
constexpr std::array<std::pair<std::string_view, std::string_view>, 17> kNamePrefixToProvider{{
    {"mlx5_", "mlx5"}, {"mlx4_", "mlx4"}, {"bnxt_re", "bnxt_re"}, {"irdma", "irdma"},
    {"i40iw", "i40iw"}, {"rxe", "rxe"}, {"siw", "siw"}, {"efa", "efa"}, {"rdmap", "efa"},
    {"hfi1_", "hfi1"}, {"qib", "qib"}, {"mana_", "mana"}, {"erdma_", "erdma"}, {"hns_", "hns"},
    {"cxgb4_", "cxgb4"}, {"mthca", "mthca"}, {"ionic_", "ionic"},
}};

LinkLayer parse_link_layer(std::string_view s) {
  if (s == "InfiniBand") return LinkLayer::kInfiniBand;
  if (s == "Ethernet") return LinkLayer::kEthernet;
  return LinkLayer::kUnknown;
}

void add_netdev(std::vector<NetdevRef>& out, std::string name, std::string_view via) {
  if (name.empty()) return;
  for (const auto& n : out)
    if (n.name == name) return;
  out.push_back(NetdevRef{std::move(name), std::string(via)});
}

// The netdevs of the device's parent function (device/net), read once per device; dev_port
// only matters, and is only read, when the function has several (mlx4 dual-port, IPoIB children).
struct FunctionNetdev {
  std::string name;
  std::optional<std::uint64_t> dev_port;
};
std::vector<FunctionNetdev> function_netdevs(const std::string& dev_path) {
  std::vector<FunctionNetdev> out;
  auto nets = sysfs::list_names(dev_path + "/device/net");
  if (!nets) return out;
  for (auto& n : nets.value) {
    FunctionNetdev f{n, std::nullopt};
    if (nets.value.size() > 1)
      if (auto dp = sysfs::read_u64(dev_path + "/device/net/" + n + "/dev_port")) f.dev_port = dp.value;
    out.push_back(std::move(f));
  }
  return out;
}

// A bonding master's slaves (class/net/<bond>/bonding/slaves: "ens2f0np0 ens2f1np1"), in the
// kernel's order (none while it has none); nullopt for any other netdev.
std::optional<std::vector<std::string>> bond_slaves(const std::string& sysfs_root, const std::string& netdev) {
  auto r = sysfs::read_attribute(sysfs_root + "/class/net/" + netdev + "/bonding/slaves");
  if (!r) return std::nullopt;
  std::vector<std::string> out;
  std::string_view rest = r.value;
  while (!rest.empty()) {
    const auto end = std::min(rest.find(' '), rest.size());
    if (end > 0) out.emplace_back(rest.substr(0, end));
    rest.remove_prefix(std::min(end + 1, rest.size()));
  }
  return out;
}

// The netdevs that the kernel's RoCE binding names, each bond followed by its slaves (a bonded
// RoCE port's traffic, pause and PFC are on the slaves: each is read on its own).
void add_bound_netdevs(PortModel& port, const std::string& sysfs_root) {
  // Default GIDs (indices 0 and 1) are bound to the port's netdev; a few more cover VLANs and
  // macvlans. Only RoCE ports have the binding (InfiniBand ports answer EINVAL).
  if (port.link_layer != LinkLayer::kEthernet) return;
  auto ndevs = sysfs::Dir::open(port.path + "/gid_attrs/ndevs");
  if (!ndevs) return;
  for (const char* i : {"0", "1", "2", "3"}) {
    auto r = ndevs.value.read_attribute(i);
    if (!r) continue;
    const auto before = port.netdevs.size();
    add_netdev(port.netdevs, r.value, "gid_attrs");
    if (port.netdevs.size() == before) continue;  // seen already, slaves included
    auto slaves = bond_slaves(sysfs_root, r.value);
    if (!slaves) continue;
    port.netdevs.back().bond = true;
    for (auto& s : *slaves) add_netdev(port.netdevs, std::move(s), "bond_slave");
  }
}

// The port's netdevs: the kernel's RoCE binding (gid_attrs/ndevs, the only view of a bond) with
// a bond's slaves, rxe's parent, then the parent function's netdevs (matched on dev_port =
// port - 1 when several).
void resolve_netdevs(PortModel& port, const std::string& sysfs_root, const std::string& rxe_parent,
                     const std::vector<FunctionNetdev>& function) {
  add_bound_netdevs(port, sysfs_root);
  if (!rxe_parent.empty()) add_netdev(port.netdevs, rxe_parent, "parent");
  if (function.size() == 1) {
    add_netdev(port.netdevs, function.front().name, "device_net");
    return;
  }
  for (const auto& f : function)
    if (f.dev_port && *f.dev_port + 1 == port.number) add_netdev(port.netdevs, f.name, "device_net");
}

}  // namespace

std::string_view link_layer_label(LinkLayer l) {
  switch (l) {
    case LinkLayer::kInfiniBand: return "InfiniBand";
    case LinkLayer::kEthernet: return "Ethernet";
    case LinkLayer::kUnknown: break;
  }
  return "Unknown";
}

std::string driver_from(const std::string& device_name, const std::string& parent_driver, bool has_parent_attr) {
  if (has_parent_attr) return "rxe";  // only rxe has a "parent" attribute naming its netdev
  for (auto [drv, provider] : kParentDriverToProvider)
    if (parent_driver == drv) return std::string(provider);
  for (auto [prefix, provider] : kNamePrefixToProvider)
    if (device_name.starts_with(prefix)) return std::string(provider);
  return "unknown";
}

Discoverer::Discoverer(DiscoveryOptions opts) : opts_(std::move(opts)) {
  if (!opts_.device_include.empty()) include_ = std::regex(opts_.device_include, std::regex::ECMAScript);
  if (!opts_.device_exclude.empty()) exclude_ = std::regex(opts_.device_exclude, std::regex::ECMAScript);
}

bool Discoverer::selected(const std::string& device) const {
  if (!opts_.device_include.empty() && !std::regex_match(device, include_)) return false;
  if (!opts_.device_exclude.empty() && std::regex_match(device, exclude_)) return false;
  return true;
}

// A device as walked: the model less the netdevs, the rxe parent, and the identities of the
// directories it was read from, taken before they were read (a change during the walk is seen next time).
struct Discoverer::Walked {
  DeviceModel dev;
  std::string rxe_parent;
  std::vector<sysfs::DirIdentity> ids;  // device, ports/, each port
};

namespace {
// Appends the identity of a directory about to be read when it has been still long enough to
// be trusted; false otherwise (or when it cannot be stat'ed).
bool add_settled(std::vector<sysfs::DirIdentity>& ids, const std::string& path, int racy_seconds) {
  auto id = sysfs::DirIdentity::of(path);
  if (!id || !id.value.settled(racy_seconds)) return false;
  ids.push_back(id.value);
  return true;
}

// The identities a walk of dev would take now (device, ports/, each port, in the model's order).
std::optional<std::vector<sysfs::DirIdentity>> settled_ids(const DeviceModel& dev, int racy_seconds) {
  std::vector<sysfs::DirIdentity> ids;
  ids.reserve(dev.ports.size() + 2);
  if (!add_settled(ids, dev.path, racy_seconds) || !add_settled(ids, dev.path + "/ports", racy_seconds))
    return std::nullopt;
  for (const auto& p : dev.ports)
    if (!add_settled(ids, p.path, racy_seconds)) return std::nullopt;
  return ids;
}
}  // namespace

std::shared_ptr<const HostModel> Discoverer::discover() const {
  auto host = std::make_shared<HostModel>();
  host->sysfs_root = opts_.sysfs_root;
  const std::string class_dir = opts_.sysfs_root + "/class/infiniband";
  std::lock_guard lock(mu_);
  auto devs = sysfs::list_names(class_dir);
  if (!devs) {
    // No RDMA subsystem at all is normal (not an issue); anything else is.
    if (devs.error != ReadError::kNotFound) host->issues.push_back({class_dir, devs.error});
    walked_.clear();
    return host;
  }
  std::map<std::string, std::shared_ptr<const Walked>> walked;  // what the next scrape may reuse
  for (auto& name : devs.value) {
    if (!selected(name)) {
      host->excluded.push_back(name);
      continue;
    }
    std::shared_ptr<const Walked> w;
    if (auto it = walked_.find(name); it != walked_.end()) {
      auto now = settled_ids(it->second->dev, opts_.racy_seconds);
      if (now && *now == it->second->ids) w = it->second;
    }
    if (!w) {
      auto fresh = std::make_shared<Walked>();
      DeviceModel& dev = fresh->dev;
      dev.name = name;
      dev.path = class_dir + "/" + name;
      // Each identity is taken before its directory is read: a change during the walk is seen next time.
      const int racy = opts_.racy_seconds;
      bool keep = add_settled(fresh->ids, dev.path, racy) && add_settled(fresh->ids, dev.path + "/ports", racy);
      auto ports = sysfs::list_names(dev.path + "/ports");
      if (!ports) {
        host->issues.push_back({dev.path + "/ports", ports.error});  // vanished mid-walk, or broken
        continue;
      }
      auto parent = sysfs::read_attribute(dev.path + "/parent");
      if (parent) fresh->rxe_parent = parent.value;
      auto parent_driver = sysfs::read_link_basename(dev.path + "/device/driver");
      dev.driver = driver_from(name, parent_driver ? parent_driver.value : "", parent.ok());
      for (auto& p : ports.value) {
        auto num = sysfs::parse_u64(p);
        if (!num || *num > 0xffff) continue;
        PortModel port;
        port.number = static_cast<std::uint32_t>(*num);
        port.number_label = p;
        port.path = dev.path + "/ports/" + p;
        dev.ports.push_back(std::move(port));
      }
      std::sort(dev.ports.begin(), dev.ports.end(),
                [](const PortModel& a, const PortModel& b) { return a.number < b.number; });
      for (auto& port : dev.ports) {
        keep = keep && add_settled(fresh->ids, port.path, racy);
        auto ll = sysfs::read_attribute(port.path + "/link_layer");
        if (ll) port.link_layer = parse_link_layer(ll.value);
        else host->issues.push_back({port.path + "/link_layer", ll.error}), keep = false;
      }
      w = fresh;
      if (keep) walked.emplace(name, w);
    } else {
      walked.emplace(name, w);
    }
    DeviceModel dev = w->dev;
    const auto function = function_netdevs(dev.path);
    for (auto& port : dev.ports) resolve_netdevs(port, opts_.sysfs_root, w->rxe_parent, function);
    host->devices.push_back(std::move(dev));
  }
  walked_ = std::move(walked);  // devices gone, or walked with a problem, leave it
  return host;
}

}  // namespace rdma::model
