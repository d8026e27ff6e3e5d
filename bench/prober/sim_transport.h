// The benches' transport for the real Engine on a simulated clock: every connect and pairing
// succeeds at once (one port pair per peer, mlx5_0/1 or what `device` says), every probe completes
// `rtt` after its post. Events wait in `pending`, ordered by time, for the bench's loop to hand
// them back; `connects` keeps every ConnectRequest (their flow labels, for flow_labels.cpp).
// sim_peers: the peers they probe.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectors/prober/engine/engine.h"

namespace rdma::collectors::prober {

struct SimTransport final : Transport {
  explicit SimTransport(std::string device = "mlx5_0") : device_(std::move(device)) {}
  TimePoint now{};
  Clock::duration rtt{};
  std::deque<TransportEvent> pending;  // ordered by .at
  std::vector<ConnectRequest> connects;
  void connect(const ConnectRequest& r) override {
    connects.push_back(r);
    push(TransportEvent::Kind::kConnected, r.link, 0, now);
  }
  std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string&) override {
    push(TransportEvent::Kind::kCompletion, link, probe, now + rtt);
    return now;
  }
  void close(std::uint64_t) override {}
  // The events due by `now`, in order, into `out` (cleared first): what one wake-up reads.
  void take_due(std::vector<TransportEvent>& out) {
    out.clear();
    while (!pending.empty() && pending.front().at <= now) {
      out.push_back(std::move(pending.front()));
      pending.pop_front();
    }
  }
  // Every peer pairs its one port with ours at once (the real pairing is a handshake per peer
  // per pairing_refresh, on the connector thread).
  void pair(std::uint64_t request, const PeerSpec&) override {
    push(TransportEvent::Kind::kPaired, request, 0, now);
    pending.back().pairs.push_back(PeerPort{{device_, 1}, device_, 1, "rail0", {}, {}});
  }

 private:
  void push(TransportEvent::Kind kind, std::uint64_t link, std::uint64_t probe, TimePoint at) {
    TransportEvent e;
    e.kind = kind;
    e.link = link;
    e.probe = probe;
    e.ok = true;
    e.at = at;
    pending.push_back(std::move(e));
  }
  std::string device_;
};

// `count` static peers named PREFIX0, PREFIX1, ... at 10.0.x.y, in 8 groups g0..g7.
inline std::vector<PeerSpec> sim_peers(int count, const std::string& prefix) {
  std::vector<PeerSpec> peers;
  for (int i = 0; i < count; ++i) {
    PeerSpec p;
    p.name = prefix + std::to_string(i);
    p.address = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
    p.tcp_port = 9662;
    p.group = "g" + std::to_string(i % 8);
    p.source = "static";
    peers.push_back(p);
  }
  return peers;
}

}  // namespace rdma::collectors::prober
