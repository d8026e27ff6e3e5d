// How two PCI functions are connected, in the terms of `nvidia-smi topo -m` (NVML's
// nvmlGpuTopologyLevel_t): PIX, PXB, PHB, NODE, SYS. Pure: computed from the locations only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sources/pci/tree.h"

namespace rdma::pci {

// Ordered from closest to farthest: the numeric value is what the series carry (min() = closest).
enum class Relation : std::uint8_t {
  kPix = 1,   // at most one PCIe switch between them (NVML_TOPOLOGY_SINGLE)
  kPxb = 2,   // several switches, no host bridge (NVML_TOPOLOGY_MULTIPLE)
  kPhb = 3,   // through the host bridge (different root ports of one host bridge)
  kNode = 4,  // different host bridges of one NUMA node
  kSys = 5,   // across NUMA nodes (the SMP interconnect: UPI, xGMI)
};
std::string_view relation_name(Relation r);  // "PIX", ...
// "PIX" ... "SYS" (as written in an expect: section); false for anything else.
bool parse_relation(std::string_view s, Relation& out);

struct Endpoint {
  const Location* location;
  int numa_node;
};
// The relation of two functions. Same host bridge: the deepest common function of both chains is
// a bridge (a switch's upstream port, or a port both sit below); with at most one bridge between
// it and each side the two are behind one switch (PIX), otherwise behind several (PXB); no common
// function: different root ports (PHB). Different host bridges: NODE when the NUMA nodes are the
// same (or the platform gives none, -1), else SYS.
Relation relation(const Endpoint& a, const Endpoint& b);
// The bridges a peer-to-peer transfer between a and b passes, below the host bridge (where ACS
// would redirect it): the common ancestor and the bridges between it and each side, as chain
// indices of a (first) and b. Empty for different root ports or host bridges.
std::vector<std::string> bridges_between(const Location& a, const Location& b);

}  // namespace rdma::pci
