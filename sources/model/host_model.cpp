#include "sources/model/host_model.h"

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "sources/sysfs/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::model {
namespace {

// Kernel driver of the parent device -> RDMA provider.
constexpr std::array<std::pair<std::string_view, std::string_view>, 13> kParentDriverToProvider{{
    {"mlx5_core", "mlx5"}, {"mlx4_core", "mlx4"}, {"bnxt_en", "bnxt_re"}, {"ice", "irdma"},
    {"i40e", "i40iw"}, {"idpf", "irdma"}, {"efa", "efa"}, {"hfi1", "hfi1"}, {"ib_qib", "qib"},
    {"mana", "mana"}, {"erdma", "erdma"}, {"hns3", "hns"}, {"ionic", "ionic"},
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

// The netdevs of the device's parent function (device/net); dev_port only matters, and is only
// read, when the function has several (mlx4 dual-port, IPoIB children).
struct FunctionNetdev {
  std::string name;
  std::optional<std::uint64_t> dev_port;
};

// device/net as listed, kept with the device's walk while it is the same: its identity (a
// netdev added or removed changes its link count, as each is a directory) and each entry's inode
// (a netdev renamed is a name gone; two swapped are two inodes moved). A rename need not change
// a kernfs directory's times, so the entries are checked one by one: for a PF with one netdev,
// two stats instead of opening, listing and closing the directory at every scrape.
struct NetdevListing {
  sysfs::Dir dir;
  sysfs::DirIdentity id;
  std::vector<FunctionNetdev> list;
  std::vector<ino_t> inos;  // by index in list

  bool still(int dev_fd, int racy_seconds) const {
    auto now = sysfs::DirIdentity::of(dev_fd, "device/net");
    if (!now || !(now.value == id) || !now.value.settled(racy_seconds)) return false;
    for (std::size_t i = 0; i < list.size(); ++i) {
      auto e = sysfs::DirIdentity::of(dir.fd(), list[i].name.c_str());
      if (!e || e.value.ino != inos[i]) return false;
    }
    return true;
  }

  // nullopt where the directory cannot be kept (absent, unreadable, changed within the racy
  // window): the list is then in `out` only.
  static std::optional<NetdevListing> read(const std::string& dev_path, int racy_seconds,
                                           std::vector<FunctionNetdev>& out) {
    out.clear();
    const std::string path = dev_path + "/device/net";
    auto dir = sysfs::Dir::open(path);
    if (!dir) return std::nullopt;
    auto id = sysfs::DirIdentity::of(dir.value.fd());  // before the listing: a change during it is seen next time
    auto nets = sysfs::list_names(path);
    if (!nets) return std::nullopt;
    bool keep = id.ok() && id.value.settled(racy_seconds);
    NetdevListing l{std::move(dir.value), id.ok() ? id.value : sysfs::DirIdentity{}, {}, {}};
    for (auto& n : nets.value) {
      FunctionNetdev f{n, std::nullopt};
      if (nets.value.size() > 1)
        if (auto dp = sysfs::read_u64(path + "/" + n + "/dev_port")) f.dev_port = dp.value;
      auto e = sysfs::DirIdentity::of(l.dir.fd(), n.c_str());
      keep = keep && e.ok();
      l.inos.push_back(e.ok() ? e.value.ino : 0);
      out.push_back(std::move(f));
    }
    if (!keep) return std::nullopt;
    l.list = out;
    return l;
  }
};

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

// A device as walked: the model less the netdevs, the rxe parent, its directory, ports/ and each
// port kept open, and the identities of these directories, each taken from its descriptor before
// it was read (a change during the walk is seen next time).
struct Discoverer::Walked {
  DeviceModel dev;
  std::string rxe_parent;
  sysfs::Dir dir;
  std::vector<sysfs::Dir> below;        // ports/, then each port in dev.ports' order
  std::vector<sysfs::DirIdentity> ids;  // device, ports/, each port
  // device/net as last listed; changed under Discoverer::mu_.
  mutable std::optional<NetdevListing> netdevs;

  // Whether the walk still holds: the device's name in class/infiniband (class_fd) names the
  // directory it was walked in, and ports/ and each port have the identities they had. Only the
  // device is looked up by name: while a directory keeps its identity no entry of it was added,
  // removed or renamed (that changes its times, or on kernfs the whole device is a new one), so
  // its entries still name the directories kept open below it, whose own changes their
  // descriptors show (an fstat each instead of a path walk from the device's directory).
  bool still(int class_fd, int racy_seconds) const;
};

namespace {
// Appends the identity of an open directory about to be read when it has been still long enough
// to be trusted; false otherwise (or when it cannot be stat'ed).
bool add_settled(std::vector<sysfs::DirIdentity>& ids, int fd, int racy_seconds) {
  auto id = sysfs::DirIdentity::of(fd);
  if (!id || !id.value.settled(racy_seconds)) return false;
  ids.push_back(id.value);
  return true;
}

}  // namespace

bool Discoverer::Walked::still(int class_fd, int racy_seconds) const {
  auto top = sysfs::DirIdentity::of(class_fd, dev.name.c_str());
  if (!top || top.value != ids[0] || !top.value.settled(racy_seconds)) return false;
  for (std::size_t i = 0; i < below.size(); ++i) {
    auto id = sysfs::DirIdentity::of(below[i].fd());
    if (!id || id.value != ids[1 + i] || !id.value.settled(racy_seconds)) return false;
  }
  return true;
}

std::shared_ptr<const HostModel> Discoverer::discover() const {
  auto host = std::make_shared<HostModel>();
  host->sysfs_root = opts_.sysfs_root;
  const std::string class_dir = opts_.sysfs_root + "/class/infiniband";
  std::lock_guard lock(mu_);
  // Listed, and each device's name looked up, through one descriptor of the directory.
  auto cls = sysfs::Dir::open(class_dir);
  auto devs = cls ? cls.value.names() : Result<std::vector<std::string>>::failure(cls.error, cls.sys_errno);
  if (!devs) {
    // No RDMA subsystem at all is normal (not an issue); anything else is.
    if (devs.error != ReadError::kNotFound) host->issues.push_back({class_dir, devs.error});
    walked_.clear();
    last_.reset();
    return host;
  }
  // walked_ keeps what the next scrape may reuse: devices gone, or walked again, leave it.
  std::erase_if(walked_, [&](const auto& kv) { return !std::binary_search(devs.value.begin(), devs.value.end(), kv.first); });
  // Each device as found in this scrape, built into the model once all are checked.
  struct Found {
    std::shared_ptr<const Walked> w;
    bool trusted;
    std::vector<FunctionNetdev> fresh_netdevs;  // device/net as read now where it is not kept
  };
  std::vector<Found> found;
  found.reserve(devs.value.size());
  bool unchanged = true;  // every device's walk and device/net listing reused
  for (auto& name : devs.value) {
    if (!selected(name)) {
      host->excluded.push_back(name);
      continue;
    }
    std::shared_ptr<const Walked> w;
    bool trusted = true;  // the walk's identities are all taken and current
    if (auto it = walked_.find(name); it != walked_.end() && it->second->still(cls.value.fd(), opts_.racy_seconds))
      w = it->second;
    unchanged = unchanged && w;
    if (!w) {
      walked_.erase(name);
      auto fresh = std::make_shared<Walked>();
      DeviceModel& dev = fresh->dev;
      dev.name = name;
      dev.path = class_dir + "/" + name;
      // Each identity is taken before its directory is read: a change during the walk is seen next time.
      const int racy = opts_.racy_seconds;
      auto dir = sysfs::Dir::open(dev.path);
      if (dir) fresh->dir = std::move(dir.value);
      // The device's identity from the descriptor: what later scrapes stat the path against.
      auto dev_id = dir ? sysfs::DirIdentity::of(fresh->dir.fd()) : Result<sysfs::DirIdentity>::failure(dir.error);
      bool keep = dev_id && dev_id.value.settled(racy);
      if (keep) fresh->ids.push_back(dev_id.value);
      auto ports_dir = sysfs::Dir::open(dev.path + "/ports");
      keep = keep && ports_dir && add_settled(fresh->ids, ports_dir.value.fd(), racy);
      auto ports = ports_dir ? ports_dir.value.names() : Result<std::vector<std::string>>::failure(ports_dir.error, ports_dir.sys_errno);
      if (ports_dir) fresh->below.push_back(std::move(ports_dir.value));
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
        if (keep) {
          auto port_dir = sysfs::Dir::open(port.path);
          keep = port_dir && add_settled(fresh->ids, port_dir.value.fd(), racy);
          if (port_dir) fresh->below.push_back(std::move(port_dir.value));
        }
        auto ll = sysfs::read_attribute(port.path + "/link_layer");
        if (ll) port.link_layer = parse_link_layer(ll.value);
        else host->issues.push_back({port.path + "/link_layer", ll.error}), keep = false;
      }
      w = fresh;
      trusted = keep;
      if (keep) walked_.emplace(name, w);
    }
    std::vector<FunctionNetdev> fresh_netdevs;
    const bool listing_kept = w->netdevs && w->netdevs->still(w->dir.fd(), opts_.racy_seconds);
    if (!listing_kept) w->netdevs = NetdevListing::read(w->dev.path, opts_.racy_seconds, fresh_netdevs);
    // A RoCE port's netdevs are read at every scrape (gid_attrs/ndevs, bond slaves).
    unchanged = unchanged && listing_kept &&
                std::none_of(w->dev.ports.begin(), w->dev.ports.end(),
                             [](const PortModel& p) { return p.link_layer == LinkLayer::kEthernet; });
    found.push_back(Found{std::move(w), trusted, std::move(fresh_netdevs)});
  }
  // The same devices, each from the walk and the device/net listing it was built from last time:
  // last time's model is this one (copying each device's model and resolving its netdevs again
  // showed in the profile under bench/port).
  auto same_devices = [&] {
    if (!last_ || last_->devices.size() != found.size() || last_->excluded != host->excluded) return false;
    for (std::size_t i = 0; i < found.size(); ++i)
      if (last_->devices[i].name != found[i].w->dev.name) return false;
    return true;
  };
  if (unchanged && host->issues.empty() && same_devices()) return last_;
  for (const auto& f : found) {
    DeviceModel dev = f.w->dev;
    if (f.trusted) {
      dev.identity = f.w->ids[0];
      for (std::size_t i = 0; i < dev.ports.size(); ++i) dev.ports[i].identity = f.w->ids[2 + i];
    }
    const auto& function = f.w->netdevs ? f.w->netdevs->list : f.fresh_netdevs;
    for (auto& port : dev.ports) resolve_netdevs(port, opts_.sysfs_root, f.w->rxe_parent, function);
    host->devices.push_back(std::move(dev));
  }
  last_ = host;
  return host;
}

}  // namespace rdma::model
