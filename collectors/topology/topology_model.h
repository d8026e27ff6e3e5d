// The host's PCI topology as the topology collector sees it: where each RDMA device's PCI function
// sits, the accelerators, how each pair is connected (nvidia-smi topo -m terms) and the ACS state
// of the bridges between each NIC and its closest GPUs. Built from sysfs when the topology changes
// (or the refresh interval passes), shared read-only by the scrapes in between.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sources/model/host_model.h"
#include "sources/pci/topology.h"
#include "sources/pci/tree.h"

namespace rdma::collectors::topology {

struct Nic {
  std::string device;          // RDMA device name
  pci::Location location;
  pci::Identity identity;
  std::string model;           // hca_type (mlx5: "MT4129"), else "vvvv:dddd" of the PCI function
  std::string fw_ver;          // as the device's fw_ver file says (may be empty: rxe)
};

struct PathBridge {
  std::string bdf;
  pci::Acs acs;
};

// A NIC and one of its closest GPUs (or a GPU and one of its closest NICs) below one host bridge.
struct Path {
  std::size_t nic = 0;
  std::size_t gpu = 0;
  std::vector<PathBridge> bridges;
};

struct Topology {
  std::vector<Nic> nics;
  std::vector<pci::Gpu> gpus;                          // by PCI address: index = nvidia-smi's GPU index
  std::vector<std::vector<pci::Relation>> relation;    // [nic][gpu]
  std::vector<pci::Relation> nic_closest;              // per NIC: its closest GPU's relation
  std::vector<pci::Relation> gpu_closest;              // per GPU: its closest NIC's relation
  std::vector<Path> paths;                             // PIX/PXB pairs closest in either direction
  std::vector<std::string> not_pci;                    // RDMA devices without a PCI function (rxe on veth, siw)
  bool bus_present = false;
  std::size_t functions = 0;
  std::vector<std::pair<std::string, ReadError>> issues;
  // The paths of a GPU (to its closest NICs).
  std::vector<const Path*> paths_of_gpu(std::size_t gpu) const;
};

std::shared_ptr<const Topology> build_topology(const std::string& sysfs_root, const model::HostModel& host);

// Peer-memory paths for GPUDirect RDMA, read at every scrape (a module may be loaded any time).
struct PeerMemory {
  bool nvidia_peermem = false;  // /sys/module/nvidia_peermem (NVIDIA driver >= 470)
  bool nv_peer_mem = false;     // /sys/module/nv_peer_mem (Mellanox's legacy module)
  bool memory_peers = false;    // /sys/kernel/mm/memory_peers/<client> (MLNX_OFED's peer-memory API)
  bool dma_buf = false;         // kernel >= 5.12 (ib_umem_dmabuf): GPUDirect RDMA through dma-buf
  bool any() const { return nvidia_peermem || nv_peer_mem || memory_peers || dma_buf; }
  std::string observed() const;  // "nvidia_peermem,dma_buf" or "none"
};
PeerMemory read_peer_memory(const std::string& sysfs_root, const std::string& procfs_root);
// "6.1.0-18-amd64" -> whether it is >= major.minor.
bool kernel_at_least(std::string_view release, int major, int minor);

}  // namespace rdma::collectors::topology
