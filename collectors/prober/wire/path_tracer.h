// The path tracer's socket side (docs/prober.md, "Path tracing"): one trace of one RoCE v2 flow
// with TTL-limited UDP packets that ECMP hashes as the flow's probes (same addresses, source port
// from the flow label, UDP 4791, the probes' traffic class, out of the rail's netdev, a BTH with
// the flow's destination QP: trace_packet.h), the answers read from the socket's error queue
// (IP_RECVERR / IPV6_RECVERR): no raw socket, no privilege beyond binding to the netdev.
//
// A trace sends TTL 1, 2, ..., each after a token of the caller's pacer, and waits up to
// hop_timeout for each TTL's answer; an answer counts only when it quotes this trace's packet
// (check_answer: the BTH with the flow's destination QP and a TTL sent in the PSN), which also
// names the TTL it answers, so a late answer is put at its hop and several TTLs may be out at
// once (the silent tail overlaps: see trace()). Everything else is counted by reason and
// ignored. It stops at the destination's answer (an unreachable from the destination address:
// a host without a RoCE listener on 4791), at an unreachable from a router, after
// `stop_after_silent` unanswered TTLs in a row, or at max_hops. Nothing is carried from an
// earlier trace: each learns the path and the destination's distance anew. Every wait has a
// deadline; memory is bounded by max_hops.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collectors/prober/wire/handshake.h"

namespace rdma::collectors::prober {

// What a trace needs of a connected flow (the transport learns it at connect).
struct TraceTarget {
  Gid source{}, dest{};     // the flow's GIDs (IPv4-mapped for IPv4)
  unsigned ifindex = 0;     // the source GID's netdev (the rail's); 0: unknown (the route decides)
  std::uint16_t sport = 0;  // qp_udp_sport() of the flow's label
  std::uint32_t dest_qpn = 0;
  std::uint8_t tos = 0;     // the probes' traffic class (IP TOS / IPv6 traffic class)
  bool operator==(const TraceTarget&) const = default;
};

struct TraceOptions {
  unsigned max_hops = 8;
  std::chrono::milliseconds hop_timeout{250};
  unsigned stop_after_silent = 2;
};

struct TraceOutcome {
  // "" when the trace ran (complete or partial); else why not, a state of this flow's trace:
  // port_in_use (EADDRINUSE: another socket holds the source port), permission (EPERM/EACCES),
  // no_route (connect refused: no route to the destination), socket (any other setup error),
  // stopped (the prober stopped meanwhile), no_answer (not one hop answered).
  std::string failure;
  std::vector<std::string> hops;  // hop_list(): "*" for unanswered TTLs, the destination last when reached
  bool complete = false;          // the destination answered this trace
  std::size_t distance = 0;       // the TTL the destination answered at in this trace (0: it did not)
  std::uint64_t packets = 0, answers = 0;  // trace packets sent, ICMP answers taken
  std::map<std::string, std::uint64_t> ignored;  // answers not taken, by reason (AnswerCheck, and
                                                 // duplicate, beyond_destination)
  // How the socket is tied to the netdev: "bindtodevice", "unicast_if" (SO_BINDTODEVICE refused
  // unprivileged), "" when no ifindex was given or the trace failed before.
  std::string device_binding;
};

// Called before each packet: blocks until a token is there and returns true, or returns false
// when the trace must end (the prober stops).
using TracePacer = std::function<bool()>;

class PathTracer {
 public:
  virtual ~PathTracer() = default;
  virtual TraceOutcome trace(const TraceTarget& t, const TraceOptions& o, const TracePacer& pace) = 0;
};

// The real one: a UDP socket per trace, closed when it ends.
class SocketPathTracer final : public PathTracer {
 public:
  TraceOutcome trace(const TraceTarget& t, const TraceOptions& o, const TracePacer& pace) override;
};

}  // namespace rdma::collectors::prober
