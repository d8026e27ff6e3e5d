#include "collectors/topology/topology_model.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "sources/sysfs/reader.h"

namespace rdma::collectors::topology {
namespace {

std::string hex4(std::uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

}  // namespace

std::vector<const Path*> Topology::paths_of_gpu(std::size_t gpu) const {
  std::vector<const Path*> out;
  for (const auto& p : paths)
    if (p.gpu == gpu && relation[p.nic][gpu] == gpu_closest[gpu]) out.push_back(&p);
  return out;
}

// A software RDMA device (rxe) has no PCI function of its own: its traffic leaves through the
// netdev it is bound to (the rdma link's parent, first among the port's netdevs as the RoCE GID
// binding), so the PCIe path and the GPU relations are that netdev's function's: its device link,
// where it has one (a veth has none). Not over a bond: which slave's function would be arbitrary.
namespace {
std::optional<std::string> lower_netdev_device(const model::HostModel& host, const model::DeviceModel& dev) {
  for (const auto& port : dev.ports)
    for (const auto& nd : port.netdevs)
      if (!nd.bond && nd.via != "bond_slave") return host.sysfs_root + "/class/net/" + nd.name + "/device";
  return std::nullopt;
}
}  // namespace

std::shared_ptr<const Topology> build_topology(const std::string& sysfs_root, const model::HostModel& host) {
  auto t = std::make_shared<Topology>();
  auto scan = pci::scan_gpus(sysfs_root);
  t->bus_present = scan.bus_present;
  t->functions = scan.functions;
  t->gpus = std::move(scan.gpus);
  t->issues = std::move(scan.issues);
  for (const auto& dev : host.devices) {
    std::string link = dev.path + "/device";
    auto dir = pci::canonical(link);
    if (!dir && dir.error == ReadError::kNotFound)
      if (auto lower = lower_netdev_device(host, dev)) dir = pci::canonical(link = *lower);
    std::optional<pci::Location> loc;
    if (dir) loc = pci::locate(dir.value);
    else if (dir.error != ReadError::kNotFound) t->issues.emplace_back(link, dir.error);
    if (!loc) {
      t->not_pci.push_back(dev.name);
      continue;
    }
    Nic nic{dev.name, std::move(*loc), {}, {}, {}};
    nic.identity = pci::read_identity(nic.location.dir, t->issues);
    auto hca = sysfs::read_attribute(dev.path + "/hca_type");
    nic.model = hca && !hca.value.empty() ? hca.value : hex4(nic.identity.vendor) + ":" + hex4(nic.identity.device);
    if (auto fw = sysfs::read_attribute(dev.path + "/fw_ver")) nic.fw_ver = fw.value;
    t->nics.push_back(std::move(nic));
  }
  const std::size_t n = t->nics.size(), g = t->gpus.size();
  t->relation.assign(n, std::vector<pci::Relation>(g, pci::Relation::kSys));
  t->nic_closest.assign(n, pci::Relation::kSys);
  t->gpu_closest.assign(g, pci::Relation::kSys);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < g; ++j) {
      const auto r = pci::relation({&t->nics[i].location, t->nics[i].identity.numa_node},
                                   {&t->gpus[j].location, t->gpus[j].identity.numa_node});
      t->relation[i][j] = r;
      t->nic_closest[i] = std::min(t->nic_closest[i], r);
      t->gpu_closest[j] = std::min(t->gpu_closest[j], r);
    }
  // ACS only matters where a transfer stays below the host bridge; each bridge's config is read once.
  std::map<std::string, pci::Acs> acs;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < g; ++j) {
      const auto r = t->relation[i][j];
      if (r > pci::Relation::kPxb || (r != t->nic_closest[i] && r != t->gpu_closest[j])) continue;
      Path p{i, j, {}};
      const auto& a = t->nics[i].location;
      const auto& b = t->gpus[j].location;
      for (auto& bdf : pci::bridges_between(a, b)) {
        auto it = acs.find(bdf);
        if (it == acs.end()) {
          // The bridge's directory: a prefix of the side whose chain holds it.
          std::string dir;
          for (const auto* loc : {&a, &b})
            for (std::size_t k = 0; k < loc->chain.size() && dir.empty(); ++k)
              if (loc->chain[k] == bdf) dir = loc->dir_of(k);
          it = acs.emplace(bdf, pci::read_acs(dir, t->issues)).first;
        }
        p.bridges.push_back({std::move(bdf), it->second});
      }
      t->paths.push_back(std::move(p));
    }
  return t;
}

std::string PeerMemory::observed() const {
  std::string out;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ",";
    out += name;
  };
  add(nvidia_peermem, "nvidia_peermem");
  add(nv_peer_mem, "nv_peer_mem");
  add(memory_peers, "memory_peers");
  add(dma_buf, "dma_buf");
  return out.empty() ? "none" : out;
}

bool kernel_at_least(std::string_view release, int major, int minor) {
  int ma = 0, mi = 0;
  auto [p1, e1] = std::from_chars(release.data(), release.data() + release.size(), ma);
  if (e1 != std::errc() || p1 == release.data() + release.size() || *p1 != '.') return false;
  auto [p2, e2] = std::from_chars(p1 + 1, release.data() + release.size(), mi);
  if (e2 != std::errc()) return false;
  return ma > major || (ma == major && mi >= minor);
}

PeerMemory read_peer_memory(const std::string& sysfs_root, const std::string& procfs_root) {
  PeerMemory pm;
  pm.nvidia_peermem = sysfs::exists(sysfs_root + "/module/nvidia_peermem");
  pm.nv_peer_mem = sysfs::exists(sysfs_root + "/module/nv_peer_mem");
  if (auto peers = sysfs::list_names(sysfs_root + "/kernel/mm/memory_peers")) pm.memory_peers = !peers.value.empty();
  if (auto rel = sysfs::read_attribute(procfs_root + "/sys/kernel/osrelease")) pm.dma_buf = kernel_at_least(rel.value, 5, 12);
  return pm;
}

}  // namespace rdma::collectors::topology
