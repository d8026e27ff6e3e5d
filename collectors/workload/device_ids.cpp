#include "collectors/workload/device_ids.h"

#include "sources/pci/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::workload {

std::vector<std::string> rdma_devices_of(const model::HostModel& host, const std::string& device_id) {
  std::vector<std::string> out;
  if (pci::is_bdf(device_id)) {
    auto names = sysfs::list_names(host.sysfs_root + "/bus/pci/devices/" + device_id + "/infiniband");
    if (names) out = std::move(names.value);
    return out;
  }
  for (const auto& d : host.devices)
    if (d.name == device_id) out.push_back(d.name);
  return out;
}

}  // namespace rdma::collectors::workload
