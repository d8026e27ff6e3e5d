// Which of the prober's handshakes (port table requests and link connects) run next, on a bounded
// number of connector workers. Pure (no sockets, no clock): the VerbsTransport's workers and the
// engine tests' simulated transport schedule through the same code.
//
// Why: a black-holed peer holds a worker for the whole handshake timeout on every attempt. With
// one worker in FIFO order (what the prober had), every link due behind it waited, the engine
// counted their probes lost and localize() blamed paths and local ports that were fine. Here:
//   - at most `concurrency` handshakes at once, and at most one per peer (address and port): a
//     dead peer holds one worker, never all of them, and a peer's responder sees one pending
//     connection from this node (its per-source bound is far above that);
//   - peers are served in turn (round robin from where the last one left off), pair requests
//     before connects (they unblock a peer's links), FIFO within a peer;
//   - when a peer's TCP connect fails (unreachable, refused), its queued connects fail at once
//     with the same reason: they would have waited as long for the same answer.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectors/prober/engine/engine.h"

namespace rdma::collectors::prober {

struct HandshakeJob {
  enum class Kind : std::uint8_t { kPair, kConnect };
  Kind kind = Kind::kConnect;
  std::uint64_t id = 0;       // the link (connect) or the pair() request
  std::uint64_t attempt = 0;  // connect: the transport's attempt number
  ConnectRequest connect;     // kConnect
  PeerSpec peer;              // the peer (of a pair request; connect.peer for a connect)
};

class HandshakeQueue {
 public:
  explicit HandshakeQueue(std::size_t concurrency) : concurrency_(concurrency ? concurrency : 1) {}

  static std::string key(const PeerSpec& p) { return p.address + "|" + std::to_string(p.tcp_port); }
  void push(HandshakeJob job);
  // The next job a worker may start now, marked running; nullopt when none may.
  std::optional<HandshakeJob> take();
  // A worker finished a job for peer `key`. `unreachable`: the peer's TCP connect failed; its
  // queued connects are returned (removed) to be failed with the same reason.
  std::vector<HandshakeJob> done(const std::string& key, bool unreachable);
  // close(): a queued connect of `link` is dropped (one running ends on its own).
  void drop_connect(std::uint64_t link);
  std::size_t running() const { return running_; }
  std::size_t queued() const;

 private:
  struct PeerQueue {
    std::deque<HandshakeJob> pairs, connects;
    bool running = false;
  };
  std::optional<HandshakeJob> take_from(HandshakeJob::Kind kind);
  std::map<std::string, PeerQueue> peers_;
  std::string cursor_;  // the peer served last: the turn goes on after it
  std::size_t concurrency_, running_ = 0;
};

}  // namespace rdma::collectors::prober
