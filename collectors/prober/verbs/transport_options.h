// The settings of the prober's verbs transport and its responder (verbs_transport.h,
// responder.h): one struct both read, so that the responder needs nothing of the transport.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "collectors/prober/engine/config.h"
#include "collectors/prober/engine/peer_types.h"
#include "collectors/prober/verbs/probe_limits.h"
#include "collectors/prober/verbs/verbs_util.h"

namespace rdma::collectors::prober {

struct TransportOptions {
  std::string device_regex;  // empty: all devices
  std::size_t payload = 64;
  std::string secret;
  HostPort listen;
  std::size_t responder_max_qps = 1024;
  // The responder's bounds against strangers (responder.h): connections not yet handshaken, in
  // total and per source address (beyond: the oldest of the busiest prefix or of the address is
  // closed for the newcomer, pending_admission.h), how long one may stay pending (at most
  // handshake_timeout; a real peer answers the challenge within a round trip and a QP creation),
  // and served QPs per source address (then: busy).
  std::size_t responder_max_pending = 128;
  std::size_t responder_max_pending_per_source = 8;
  std::chrono::milliseconds responder_pending_timeout{1000};
  std::size_t responder_max_qps_per_source = 256;
  // Served (and the prober's own) handshake connections: a peer gone without a FIN is detected by
  // TCP keepalive/TCP_USER_TIMEOUT within about this long, and its QPs freed. 0: kernel defaults.
  std::chrono::milliseconds served_keepalive{60000};
  // Handshakes the connector runs at once (each peer at most one at a time).
  std::size_t connect_concurrency = 8;
  // Memory the responder registers for on-demand probe sessions at once (session hellos beyond
  // it are rejected busy); each session QP asks for at most kMaxSessionBuffer.
  std::size_t session_max_bytes = ProbeLimits::kResponderSessionBytes;
  std::string node_name;
  std::chrono::milliseconds handshake_timeout{3000};
  // After a wake-up's posts, settle() polls the CQs for up to this long before the loop arms the
  // completion channel and sleeps in epoll (0: sleep at once). Bounded CPU: at most poll_window
  // per wake-up, whatever the number of probes posted in it.
  std::chrono::microseconds poll_window{50};
  // The class of the prober's probes and of the responder's answers (its ACKs): the same on
  // every node, as one config gives it.
  TrafficClass traffic_class;
  // Rail labels of this host's ports (sent in its port table and used to pair), and whether
  // every local port pairs with every peer port of its link layer (pairing.h).
  std::vector<RailRule> rails;
  bool cross_rail = false;
};

}  // namespace rdma::collectors::prober
