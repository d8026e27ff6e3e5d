// The declared shape of a node (collectors.topology.expect in the config file): what a healthy
// node of its class has. Each item becomes one or more checks, rdma_topology_check{check=...}.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sources/model/host_model.h"
#include "sources/pci/topology.h"

namespace rdma::collectors::topology {

struct PortExpect {
  model::LinkLayer link_layer = model::LinkLayer::kUnknown;
  std::string link_layer_name;        // as written: "InfiniBand", "Ethernet"
  std::uint32_t count = 0;            // ports of this link layer ACTIVE at >= min_rate
  std::uint64_t min_rate_gbps = 0;    // Gb/s as ports/<n>/rate prints it ("400 Gb/sec (4X NDR)")
};

struct Expect {
  bool present = false;
  std::string devices_pattern;        // which RDMA devices the per-NIC checks cover (regex; all if empty)
  std::optional<std::regex> devices;
  std::optional<std::uint32_t> gpus;  // accelerators found by PCI class
  std::vector<PortExpect> ports;
  std::optional<std::uint32_t> mtu;   // netdev MTU of each Ethernet port
  std::optional<std::uint32_t> pcie_speed_tenths;  // per NIC, current link speed at least (GT/s x10)
  std::optional<std::uint32_t> pcie_width;         // per NIC, current link width at least
  std::optional<pci::Relation> gpu_nic_relation;   // the closest NIC of every GPU at most this far
  bool acs_off = false;               // no ACS P2P redirect on the bridges between each GPU and its NIC
  // A GPUDirect RDMA peer-memory path: kModule wants a peer-memory client loaded (nvidia_peermem,
  // nv_peer_mem, an MLNX_OFED memory_peers client); kAny also takes a dma-buf capable kernel.
  enum class PeerMemory : std::uint8_t { kOff, kModule, kAny };
  PeerMemory peer_memory = PeerMemory::kOff;
  std::map<std::string, std::vector<std::string>> firmware;  // device model -> allowed fw_ver
  bool covers(const std::string& device) const { return !devices || std::regex_search(device, *devices); }
};

// Throws exporter::ConfigError naming the file, line and column of the bad item.
Expect parse_expect(const YAML::Node& node, const std::string& origin);

}  // namespace rdma::collectors::topology
