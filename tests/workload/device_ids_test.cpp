// Device plugin IDs -> RDMA devices on a fake sysfs: SR-IOV VFs by PCI address
// (bus/pci/devices/<bdf>/infiniband/<dev>, as the kernel lays it out), RDMA device names as
// themselves, anything else (shared-plugin IDs, GPU UUIDs, paths) nothing.
#include <catch2/catch.hpp>

#include <filesystem>

#include "collectors/workload/device_ids.h"
#include "tests/lib/temp_tree.h"

using rdma::collectors::workload::rdma_devices_of;

TEST_CASE("a VF's PCI address gives the RDMA devices under it") {
  rdma::testing::TempTree t("workload_ids");
  // Real sysfs: bus/pci/devices/<bdf> is a link to devices/pci.../<bdf>; infiniband/ holds the
  // device's directory.
  t.write("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2/infiniband/mlx5_3/node_type", "1: CA\n");
  t.write("devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3/net/ens1f0v1/ifindex", "9\n");
  std::filesystem::create_directories(t.root() + "/bus/pci/devices");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2",
                                            t.root() + "/bus/pci/devices/0000:3b:00.2");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3",
                                            t.root() + "/bus/pci/devices/0000:3b:00.3");
  rdma::model::HostModel host;
  host.sysfs_root = t.root();
  host.devices.push_back({.name = "mlx5_0"});

  CHECK(rdma_devices_of(host, "0000:3b:00.2") == std::vector<std::string>{"mlx5_3"});
  CHECK(rdma_devices_of(host, "0000:3b:00.3").empty());  // a VF without RDMA (no infiniband/)
  CHECK(rdma_devices_of(host, "0000:3b:00.4").empty());  // no such PCI device
  CHECK(rdma_devices_of(host, "mlx5_0") == std::vector<std::string>{"mlx5_0"});
  CHECK(rdma_devices_of(host, "mlx5_9").empty());
  // Not PCI addresses: never turned into paths.
  for (const char* id : {"0000:3B:00.2", "0000:3b:00.8", "3b:00.2", "../../../etc", "0000:3b:00.2/..", "f2a1c0de", ""})
    CHECK(rdma_devices_of(host, id).empty());
}
