#include "sources/dcb/ecn_sysfs.h"

#include "sources/sysfs/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::dcb {
namespace {

constexpr std::size_t kMaxParameters = 64;  // bounds the series even on a strange tree

void read_role(const std::string& dir, EcnRole& role, EcnConfig& cfg) {
  auto entries = sysfs::list_dir(dir);
  if (!entries) {
    if (entries.error != ReadError::kNotFound) cfg.issues.emplace_back(dir, entries.error);
    return;
  }
  role.present = true;
  for (const auto& e : entries.value) {
    const std::string path = dir + "/" + e.name;
    if (e.is_dir) {
      if (e.name != "enable") continue;
      for (int p = 0; p < 8; ++p) {
        auto v = sysfs::read_u64(path + "/" + std::to_string(p));
        if (v) role.enabled[p] = v.value != 0 ? 1 : 0;
        else if (v.error != ReadError::kNotFound) cfg.issues.emplace_back(path + "/" + std::to_string(p), v.error);
      }
      continue;
    }
    if (role.parameters.size() >= kMaxParameters) break;
    auto v = sysfs::read_u64(path);
    if (v) role.parameters.emplace_back(e.name, v.value);
    else cfg.issues.emplace_back(path, v.error);
  }
}

}  // namespace

int EcnConfig::enabled(int prio) const {
  const int a = np.enabled[prio], b = rp.enabled[prio];
  if (a < 0 && b < 0) return -1;
  if (a == 0 || b == 0) return 0;
  return 1;
}

EcnConfig read_ecn_config(const std::string& sysfs_root, const std::string& netdev) {
  EcnConfig cfg;
  const std::string base = sysfs_root + "/class/net/" + netdev + "/ecn";
  read_role(base + "/roce_np", cfg.np, cfg);
  read_role(base + "/roce_rp", cfg.rp, cfg);
  return cfg;
}

}  // namespace rdma::dcb
