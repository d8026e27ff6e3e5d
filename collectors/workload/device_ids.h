// Which RDMA devices a device plugin's device ID stands for, for rdma_device_allocation_info.
#pragma once

#include <string>
#include <vector>

#include "sources/model/host_model.h"

namespace rdma::collectors::workload {

// A PCI address ("0000:3b:00.2", how the SR-IOV network device plugin names VFs) gives the RDMA
// devices under <sysfs>/bus/pci/devices/<address>/infiniband/; the name of one of the host's RDMA
// devices gives itself; anything else (the RDMA shared device plugin's generated IDs) nothing.
std::vector<std::string> rdma_devices_of(const model::HostModel& host, const std::string& device_id);

}  // namespace rdma::collectors::workload
