// Types the prober's config (config.h) and its pure pairing (pairing.h) share, so that reading
// the config needs nothing of the pairing and the pairing nothing of the config's sockets.
#pragma once

#include <optional>
#include <regex>
#include <string>

namespace rdma::collectors::prober {

// One rule of collectors.prober.rails: a port is on `rail` when its device and one of its GIDs'
// netdevs match (pairing.h).
struct RailRule {
  std::string rail;
  std::optional<std::regex> device, netdev;  // nullopt: any
};

}  // namespace rdma::collectors::prober
