// Fault localization (docs/prober.md, "What the prober can and cannot tell apart"): from the
// outcomes of every flow over one window, a verdict per rail -- local_port, peer, path or none.
// Pure: no clock, no verbs; the engine gathers a window's FlowOutcomes and calls localize().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/metrics.h"

namespace rdma::collectors::prober {

// One flow (RC QP) of one link over one window.
// A probe that was due while the flow's QP was not connected (handshake refused, backoff after
// an error completion) counts as sent and lost: a stopped peer must look lossy, not idle.
struct FlowOutcome {
  std::string device; unsigned port = 0;   // local port
  std::string rail;                         // rail label ("" if none)
  std::string peer;                         // peer as configured (address or name)
  std::string peer_device; unsigned peer_port = 0;
  unsigned flow = 0;                        // index within the link
  std::uint64_t sent = 0, lost = 0;         // probes in the window; lost = timed out or error completion
  bool local_port_up = true;                // false: the local port was not ACTIVE (not probed)
};

enum class Verdict : std::uint8_t { kNone, kLocalPort, kPeer, kPath };
std::string_view verdict_label(Verdict v);  // "none", "local_port", "peer", "path"

struct LocalizeSettings {
  // A flow is judged only with at least this many probes in the window (a flow just connected,
  // or rotated in, says nothing yet).
  std::uint64_t min_probes = 10;
  // A judged flow is lossy when it lost at least min_lost probes and at least loss_ratio of
  // them: background loss of 1e-4..1e-5 never makes a flow lossy, a dropped path (every probe
  // lost) does within min_lost probes.
  std::uint64_t min_lost = 3;
  double loss_ratio = 0.05;
  // path needs, from one local port, lossy flows towards this many of the peers it probes
  // (clamped to their number), each of them with clean flows too.
  std::size_t path_min_peers = 2;
};

// A flow with enough probes in the window to be judged, and a judged flow that is lossy (the
// rules above; the path tracer traces a lossy flow afresh).
bool flow_judged(const FlowOutcome& f, const LocalizeSettings& s);
bool flow_lossy(const FlowOutcome& f, const LocalizeSettings& s);

// The verdict of one rail over one window. `verdict` is the first of local_port, peer, path
// that holds; the flags say which hold (a rail can have a dead peer and a lossy path at once).
struct Finding {
  std::string rail;
  Verdict verdict = Verdict::kNone;
  bool local_port = false, peer = false, path = false;
  std::vector<std::string> local_ports;  // "device/port" blamed (down, or losing to every peer)
  std::vector<std::string> peers;        // peers blamed (every flow on the rail lossy)
  std::size_t flows = 0, judged = 0, lossy = 0;
};

// One Finding per rail present in `flows`, sorted by rail.
std::vector<Finding> localize(const std::vector<FlowOutcome>& flows, const LocalizeSettings& s);

// Per rail rdma_prober_verdict{rail,verdict} (4 series: none, local_port, peer, path) and
// rdma_prober_blamed{rail,verdict,subject} while a port or peer is blamed; per link
// rdma_prober_link_flows_judged and rdma_prober_link_flows_lossy. Cardinality: docs/metrics.md.
void write_localization_metrics(const std::vector<Finding>& findings, const std::vector<FlowOutcome>& flows,
                                const LocalizeSettings& s, exporter::MetricSink& out);

}  // namespace rdma::collectors::prober
