#include "collectors/workload/device_ids.h"

#include "sources/sysfs/reader.h"

namespace rdma::collectors::workload {
namespace {

// dddd:bb:dd.f, hex, as the kernel writes PCI addresses in sysfs.
bool pci_address(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    const char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return s[11] <= '7';
}

}  // namespace

std::vector<std::string> rdma_devices_of(const model::HostModel& host, const std::string& device_id) {
  std::vector<std::string> out;
  if (pci_address(device_id)) {
    auto names = sysfs::list_names(host.sysfs_root + "/bus/pci/devices/" + device_id + "/infiniband");
    if (names) out = std::move(names.value);
    return out;
  }
  for (const auto& d : host.devices)
    if (d.name == device_id) out.push_back(d.name);
  return out;
}

}  // namespace rdma::collectors::workload
