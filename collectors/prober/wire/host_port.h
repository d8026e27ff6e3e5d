// A TCP endpoint as the prober writes it in settings ("[host]:port"): the responder's listening
// address and the handshake sockets take it, so it sits on the wire floor, below the config that
// parses it (engine/config.h: parse_listen).
#pragma once

#include <cstdint>
#include <string>

namespace rdma::collectors::prober {

struct HostPort {
  std::string host;  // empty = any
  std::uint16_t port = 0;
};

}  // namespace rdma::collectors::prober
