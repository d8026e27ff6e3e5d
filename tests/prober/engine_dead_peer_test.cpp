// The real Engine and localize() driven through a simulated transport whose handshakes take
// time: healthy peers answer in 2 ms, a slow one in 1.5 s, a black-holed one never (its TCP
// connect runs into the handshake timeout). The transport schedules its handshakes either as the
// VerbsTransport does (HandshakeQueue: parallel workers, peers in turn, connect starts reported)
// or as the prober once did (one worker, FIFO, connect time counted from the request), so that
// the same scenario measures both. The fake transport of engine_test.cpp connects at once and
// cannot show any of this.
#include <catch2/catch.hpp>

#include <cstdio>
#include <deque>
#include <map>
#include <set>

#include "collectors/prober/engine/connect_queue.h"
#include "collectors/prober/engine/engine.h"
#include "collectors/prober/engine/localize.h"

using namespace rdma::collectors::prober;
using namespace std::chrono_literals;

namespace {

const TimePoint T0 = TimePoint{} + 1000s;

struct SimTransport : Transport {
  bool legacy = false;  // one FIFO worker, no connect starts (the old connector thread)
  std::vector<LocalPort> locals;
  std::size_t rails = 1;
  std::set<std::string> black;  // black-holed addresses, from dead_from on
  TimePoint dead_from{};
  std::map<std::string, Clock::duration> slow;  // handshake time of slow peers
  Clock::duration timeout = 5s;                 // the transport's handshake deadline
  TimePoint now{};

  HandshakeQueue queue{8};
  std::deque<HandshakeJob> fifo;
  struct Running {
    HandshakeJob job;
    TimePoint start, done;
  };
  std::vector<std::optional<Running>> workers = std::vector<std::optional<Running>>(8);
  std::map<std::uint64_t, std::uint64_t> attempts;  // link -> current attempt
  std::uint64_t next_attempt = 1;
  std::map<std::uint64_t, std::string> up_links;  // connected link -> peer address
  std::multimap<TimePoint, TransportEvent> out;   // events due at their time

  void set_legacy() {
    legacy = true;
    workers.assign(1, std::nullopt);
  }
  bool dead(const std::string& address, TimePoint t) const { return black.count(address) && t >= dead_from; }
  bool reports_connect_start() const override { return !legacy; }

  void submit(HandshakeJob job) {
    if (legacy) {
      // the old connector: pair requests before connects, else FIFO
      if (job.kind == HandshakeJob::Kind::kPair) {
        auto it = std::find_if(fifo.begin(), fifo.end(), [](const HandshakeJob& j) { return j.kind != HandshakeJob::Kind::kPair; });
        fifo.insert(it, std::move(job));
      } else {
        fifo.push_back(std::move(job));
      }
    } else {
      queue.push(std::move(job));
    }
    start_free(now);
  }
  void connect(const ConnectRequest& r) override {
    HandshakeJob j;
    j.id = r.link;
    j.attempt = attempts[r.link] = next_attempt++;
    j.connect = r;
    submit(std::move(j));
  }
  void pair(std::uint64_t request, const PeerSpec& peer) override {
    HandshakeJob j;
    j.kind = HandshakeJob::Kind::kPair;
    j.id = request;
    j.peer = peer;
    submit(std::move(j));
  }
  std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string& reason) override {
    auto it = up_links.find(link);
    if (it == up_links.end()) return reason = "post_no_qp", std::nullopt;
    if (!dead(it->second, now)) {
      TransportEvent e;
      e.kind = TransportEvent::Kind::kCompletion;
      e.link = link, e.probe = probe, e.ok = true, e.at = now + 10us;
      out.emplace(e.at, e);
    }
    return now;
  }
  void close(std::uint64_t link) override {
    attempts.erase(link);
    up_links.erase(link);
    if (legacy) std::erase_if(fifo, [link](const HandshakeJob& j) { return j.kind == HandshakeJob::Kind::kConnect && j.id == link; });
    else queue.drop_connect(link);
  }

  const PeerSpec& peer_of(const HandshakeJob& j) const { return j.kind == HandshakeJob::Kind::kPair ? j.peer : j.connect.peer; }
  bool current(const HandshakeJob& j) const {
    auto a = attempts.find(j.id);
    return a != attempts.end() && a->second == j.attempt;
  }
  void start_free(TimePoint t) {
    for (auto& w : workers) {
      if (w) continue;
      std::optional<HandshakeJob> job;
      if (legacy) {
        if (!fifo.empty()) job = std::move(fifo.front()), fifo.pop_front();
      } else {
        job = queue.take();
      }
      if (!job) return;
      const auto& p = peer_of(*job);
      const auto took = dead(p.address, t) ? timeout : slow.count(p.address) ? slow.at(p.address) : Clock::duration(2ms);
      if (!legacy && job->kind == HandshakeJob::Kind::kConnect && current(*job)) {
        TransportEvent e;
        e.kind = TransportEvent::Kind::kConnectStarted;
        e.link = job->id, e.at = t;
        out.emplace(t, e);
      }
      w = Running{std::move(*job), t, t + took};
    }
  }
  void fail(const HandshakeJob& j, TimePoint at, const std::string& reason) {
    if (!current(j)) return;
    TransportEvent e;
    e.kind = TransportEvent::Kind::kConnectFailed;
    e.link = j.id, e.reason = reason, e.at = at;
    out.emplace(at, e);
  }
  // The handshake of `j` ends at `at`: its answer, and what it frees.
  void finish(Running& r) {
    const auto& j = r.job;
    const auto& p = peer_of(j);
    const bool unreachable = dead(p.address, r.start);
    if (j.kind == HandshakeJob::Kind::kPair) {
      TransportEvent e;
      e.kind = TransportEvent::Kind::kPaired;
      e.link = j.id, e.at = r.done, e.ok = !unreachable;
      if (unreachable) e.reason = "pairing_connect";
      else
        for (std::size_t i = 0; i < locals.size(); ++i)
          e.pairs.push_back(PeerPort{locals[i], locals[i].device, 1, "r" + std::to_string(i % rails), {}, {}});
      out.emplace(r.done, e);
    } else if (unreachable) {
      fail(j, r.done, "connect");
    } else if (current(j)) {
      up_links[j.id] = p.address;
      TransportEvent e;
      e.kind = TransportEvent::Kind::kConnected;
      e.link = j.id, e.ok = true, e.at = r.done;
      out.emplace(r.done, e);
    }
    if (!legacy)
      for (const auto& f : queue.done(HandshakeQueue::key(p), unreachable && j.kind == HandshakeJob::Kind::kConnect))
        fail(f, r.done, "connect");
  }
  TimePoint next_event() const {
    TimePoint next = TimePoint::max();
    for (const auto& w : workers)
      if (w) next = std::min(next, w->done);
    if (!out.empty()) next = std::min(next, out.begin()->first);
    return next;
  }
  // Everything that happens up to `t`, in time order, handed to the engine.
  void advance(TimePoint t, Engine& e) {
    for (;;) {
      Running* first = nullptr;
      for (auto& w : workers)
        if (w && w->done <= t && (!first || w->done < first->done)) first = &*w;
      const TimePoint ev = out.empty() ? TimePoint::max() : out.begin()->first;
      if (first && first->done <= ev) {
        Running r = std::move(*first);
        for (auto& w : workers)
          if (w && &*w == first) w.reset();
        now = r.done;
        finish(r);
        start_free(r.done);
        continue;
      }
      if (ev > t) break;
      auto node = out.extract(out.begin());
      now = node.key();
      e.handle(node.mapped());
    }
    now = t;
  }
};

struct Figures {
  std::size_t windows = 0, wrong = 0;  // windows judged after the peer died, those blaming a healthy part
  std::size_t healthy_links = 0, healthy_up = 0;
  bool all_up_within_backoff = true;   // every healthy link up within one backoff cycle of the start
};

std::vector<LocalPort> rail_ports(std::size_t n) {
  std::vector<LocalPort> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back({"mlx5_" + std::to_string(i), 1});
  return out;
}

// `peers` peers (the first, "a-dead", black-holed from dead_at on), `rails` local ports, `flows`
// flows, for `duration`; windows ending after the peer died are judged.
Figures simulate(bool legacy, std::size_t peers, std::size_t rails, unsigned flows, Clock::duration duration,
                 Clock::duration dead_at, std::chrono::milliseconds rotation, std::map<std::string, Clock::duration> slow = {}) {
  SimTransport t;
  if (legacy) t.set_legacy();
  t.locals = rail_ports(rails);
  t.rails = rails;
  t.black = {"a-dead"};
  t.dead_from = T0 + dead_at;
  t.slow = std::move(slow);
  EngineConfig c;  // the prober's defaults (settings_from): 1 s interval and timeout, 5 s connect, 30 s window
  c.seed = 11;
  c.flows = flows;
  c.flow_rotation = rotation;
  c.backoff_max = 30s;
  if (!legacy) c.backoff_jitter = 0.5, c.connect_queue_limit = 20s;
  Engine e(c, t, t.locals);
  std::vector<PeerSpec> specs;
  for (std::size_t i = 0; i < peers; ++i) {
    PeerSpec p;
    p.name = p.address = i == 0 ? std::string("a-dead") : std::string(1, static_cast<char>('b' + i - 1)) + "-ok";
    p.tcp_port = 9662;
    specs.push_back(p);
  }
  e.set_peers(specs, T0);
  Figures f;
  f.healthy_links = (peers - 1) * rails * flows;
  const LocalizeSettings ls;
  std::uint64_t seen_windows = 0;
  bool checked_start = false;
  TimePoint now = T0, next_check = T0;
  const TimePoint end = T0 + duration;
  while (now < end) {
    t.advance(now, e);
    e.tick(now);
    if (now >= next_check) {
      next_check = now + 500ms;
      const auto s = e.snapshot();
      if (!checked_start && now >= T0 + c.backoff_initial) {
        checked_start = true;  // one backoff cycle after the start: every healthy link is up
        std::size_t up = 0;
        for (std::size_t i = 1; i < peers; ++i)
          for (const auto& l : t.locals)
            for (unsigned fl = 0; fl < flows; ++fl) up += e.state(specs[i].name, l, fl) == Engine::State::kUp;
        f.all_up_within_backoff = up == f.healthy_links;
      }
      if (s.windows != seen_windows) {
        seen_windows = s.windows;
        if (now - c.window >= T0 + dead_at) {
          ++f.windows;
          bool wrong = false;
          for (const auto& finding : localize(s.window, ls)) {
            wrong = wrong || finding.local_port || finding.path;
            for (const auto& p : finding.peers) wrong = wrong || p != "a-dead";
          }
          f.wrong += wrong;
        }
      }
    }
    const TimePoint next = std::min(e.next_deadline(now), t.next_event());
    now = std::max(std::min(next, end), now + 1us);
  }
  for (std::size_t i = 1; i < peers; ++i)
    for (const auto& l : t.locals)
      for (unsigned fl = 0; fl < flows; ++fl) f.healthy_up += e.state(specs[i].name, l, fl) == Engine::State::kUp;
  return f;
}

}  // namespace

TEST_CASE("one dead peer among 8: every healthy link connects within one backoff cycle, no window blames a port or path") {
  // "a-dead" sorts first and is black-holed right after it sent its port table (it has links);
  // "c-ok" answers its handshakes in 1.5 s.
  for (auto rotation : {0ms, 5000ms}) {
    const auto f = simulate(false, 8, 2, 4, 5min, 1ms, rotation, {{"c-ok", 1500ms}});
    INFO("rotation " << rotation.count() << " ms");
    CHECK(f.windows >= 9);
    CHECK(f.wrong == 0);
    CHECK(f.healthy_up == f.healthy_links);
  }
  const auto f = simulate(false, 8, 2, 4, 30s, 1ms, 0ms);
  CHECK(f.all_up_within_backoff);
  CHECK(!simulate(true, 8, 2, 4, 30s, 1ms, 0ms).all_up_within_backoff);  // one FIFO connector: not so
}

TEST_CASE("10 simulated minutes at 9 peers x 4 rails x 4 flows with one black-holed peer: no wrong windows") {
  // The peer dies 30 s in, after its links came up; flows rotate every 5 s (ECMP coverage).
  const auto after = simulate(false, 9, 4, 4, 10min, 30s, 5000ms);
  const auto before = simulate(true, 9, 4, 4, 10min, 30s, 5000ms);
  std::printf("dead-peer simulation, 10 min, 9 peers x 4 rails x 4 flows, rotation 5 s: windows judged %zu; "
              "one FIFO connector: %zu wrong, healthy links up at the end %zu/%zu; "
              "parallel fair connector: %zu wrong, healthy links up %zu/%zu\n",
              after.windows, before.wrong, before.healthy_up, before.healthy_links, after.wrong, after.healthy_up,
              after.healthy_links);
  CHECK(after.windows >= 18);
  CHECK(after.wrong == 0);
  CHECK(after.healthy_up == after.healthy_links);
  CHECK(before.wrong > 0);  // the shape the queue exists for: the same scenario is wrong without it
}

TEST_CASE("the handshake queue: one job per peer at a time, peers in turn, pairs first, unreachable peers fail fast") {
  HandshakeQueue q(2);
  auto job = [](std::string peer, std::uint64_t id, bool pair = false) {
    HandshakeJob j;
    j.kind = pair ? HandshakeJob::Kind::kPair : HandshakeJob::Kind::kConnect;
    j.id = id;
    j.connect.peer.address = j.peer.address = std::move(peer);
    j.connect.link = id;
    return j;
  };
  for (std::uint64_t i = 1; i <= 3; ++i) q.push(job("a", i));
  for (std::uint64_t i = 4; i <= 5; ++i) q.push(job("b", i));
  q.push(job("c", 6));
  q.push(job("c", 7, true));
  auto first = q.take(), second = q.take();
  REQUIRE(first);
  REQUIRE(second);
  CHECK(first->kind == HandshakeJob::Kind::kPair);  // c's pair request before any connect
  CHECK(second->id == 1);                         // then the next peer in turn: a
  CHECK(!q.take());                               // two workers busy
  auto failed = q.done(HandshakeQueue::key(second->connect.peer), true);  // a is unreachable
  CHECK(failed.size() == 2);                      // its queued connects fail with it
  auto third = q.take();
  REQUIRE(third);
  CHECK(third->id == 4);  // b: after a in turn, not c again (c is still running its pair)
  q.drop_connect(5);
  q.done(HandshakeQueue::key(third->connect.peer), false);
  q.done(HandshakeQueue::key(first->peer), false);
  auto fourth = q.take();
  REQUIRE(fourth);
  CHECK(fourth->id == 6);
  CHECK(!q.take());
  CHECK(q.queued() == 0);
}
