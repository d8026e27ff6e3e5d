// ECN/DCQCN configuration that mlx5 (MLNX_OFED and some inbox kernels) exposes per netdev:
//   <sysfs>/class/net/<if>/ecn/roce_np/enable/<prio>   notification point (CNP generation) 0/1
//   <sysfs>/class/net/<if>/ecn/roce_rp/enable/<prio>   reaction point (rate reduction) 0/1
//   <sysfs>/class/net/<if>/ecn/roce_{np,rp}/<param>    DCQCN parameters (cnp_dscp, rpg_min_rate ...)
// Read under --path.sysfs. Drivers without the tree simply have none (kNotFound).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sources/common/result.h"

namespace rdma::dcb {

struct EcnRole {
  bool present = false;                 // the roce_np / roce_rp directory exists
  std::array<std::int8_t, 8> enabled{-1, -1, -1, -1, -1, -1, -1, -1};  // -1 = no file
  std::vector<std::pair<std::string, std::uint64_t>> parameters;       // numeric files, by name
};

struct EcnConfig {
  EcnRole np;
  EcnRole rp;
  // Problems met on the way (unreadable or non-numeric files), for the error accounting.
  std::vector<std::pair<std::string, ReadError>> issues;
  bool present() const { return np.present || rp.present; }
  // 1 enabled in both roles, 0 disabled in one, -1 unknown (no file in either role).
  int enabled(int prio) const;
};

EcnConfig read_ecn_config(const std::string& sysfs_root, const std::string& netdev);

}  // namespace rdma::dcb
