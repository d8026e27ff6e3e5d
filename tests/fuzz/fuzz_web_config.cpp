// The web config (exporter-toolkit format) and the Basic Authorization header decoder.
#include <cstdint>
#include <string>

#include "exporter/options.h"
#include "exporter/web_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  try {
    auto cfg = rdma::exporter::parse_web_config(in, "web.yml", "/etc/rdma_exporter");
    for (const auto& [user, hash] : cfg.basic_auth_users)
      if (!rdma::exporter::is_bcrypt_hash(hash) || user.empty()) __builtin_trap();
  } catch (const rdma::exporter::ConfigError&) {
  }
  if (auto cred = rdma::exporter::parse_basic_authorization(in)) {
    if (cred->first.find(':') != std::string::npos) __builtin_trap();
  }
  (void)rdma::exporter::is_bcrypt_hash(in);
  return 0;
}
