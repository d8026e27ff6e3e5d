// The transport events the prober's engine tests answer with (engine_test.cpp,
// trace_scheduler_test.cpp): one way to build a pairing answer and a completion.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "collectors/prober/engine/engine.h"

namespace rdma::collectors::prober::testing {

inline TransportEvent paired(std::uint64_t request, std::vector<PeerPort> pairs, TimePoint at) {
  TransportEvent e;
  e.kind = TransportEvent::Kind::kPaired;
  e.link = request;
  e.ok = true;
  e.at = at;
  e.pairs = std::move(pairs);
  return e;
}

inline TransportEvent completion(std::uint64_t link, std::uint64_t probe, TimePoint at, bool ok = true, std::string reason = "") {
  TransportEvent e;
  e.kind = TransportEvent::Kind::kCompletion;
  e.link = link;
  e.probe = probe;
  e.ok = ok;
  e.reason = std::move(reason);
  e.at = at;
  return e;
}

}  // namespace rdma::collectors::prober::testing
