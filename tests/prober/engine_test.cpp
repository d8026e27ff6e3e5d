#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "collectors/prober/engine/engine.h"
#include "collectors/prober/wire/trace_packet.h"
#include "engine_events.h"

using namespace rdma::collectors::prober;
using namespace std::chrono_literals;

namespace {
// A transport that records what the engine asks and lets the test answer.
struct FakeTransport : Transport {
  std::vector<ConnectRequest> connects;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> posts;  // link, probe
  std::vector<std::uint64_t> closed;
  TimePoint now{};
  bool fail_post = false;
  // pair() requests not answered yet; the engine's ticks answer them (tick() below) with one
  // pair per local port of `locals`, as a responder without a port table is paired.
  std::vector<std::pair<std::uint64_t, PeerSpec>> pairings;
  std::vector<LocalPort> locals{{"rxe0", 1}};
  bool answer_pairings = true;  // false: the test answers them
  void connect(const ConnectRequest& r) override { connects.push_back(r); }
  void pair(std::uint64_t request, const PeerSpec& peer) override { pairings.emplace_back(request, peer); }
  std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string& reason) override {
    if (fail_post) return reason = "post", std::nullopt;
    posts.emplace_back(link, probe);
    return now;
  }
  void close(std::uint64_t link) override { closed.push_back(link); }
};

const LocalPort kPort{"rxe0", 1};
const TimePoint T0 = TimePoint{} + 1000s;

PeerSpec peer(std::string name, std::string group = "") {
  PeerSpec p;
  p.name = name;
  p.address = name;
  p.tcp_port = 9662;
  p.group = std::move(group);
  return p;
}

EngineConfig config() {
  EngineConfig c;
  c.interval = 1000ms;
  c.jitter = 0.1;
  c.timeout = 500ms;
  c.seed = 7;
  c.backoff_initial = 1000ms;
  c.backoff_max = 4000ms;
  return c;
}

EngineConfig no_jitter() {
  auto c = config();
  c.jitter = 0;
  return c;
}

TransportEvent connected(std::uint64_t link, TimePoint at) {
  TransportEvent e;
  e.kind = TransportEvent::Kind::kConnected;
  e.link = link;
  e.at = at;
  return e;
}
using testing::completion;

// One round of the loop: tick, then answer the pair() requests that made (one pair per local
// port of t.locals, rail "") and tick again, as the loop's next wake-up does.
void tick(Engine& e, FakeTransport& t, TimePoint now) {
  e.tick(now);
  if (t.pairings.empty() || !t.answer_pairings) return;
  for (const auto& [request, p] : std::exchange(t.pairings, {})) {
    std::vector<PeerPort> pairs;
    for (const auto& l : t.locals) pairs.push_back(PeerPort{l, "", 0, "", {}, {}});
    e.handle(testing::paired(request, std::move(pairs), now));
  }
  e.tick(now);
}

// Advances the engine to `until` in steps of its own deadlines (what the epoll loop does).
// With `complete`, every probe completes successfully 10 µs after its post.
void run_until(Engine& e, FakeTransport& t, TimePoint from, TimePoint until, bool complete = false) {
  TimePoint now = from;
  while (now < until) {
    t.now = now;
    auto before = t.posts.size();
    tick(e, t, now);
    if (complete)
      for (auto i = before; i < t.posts.size(); ++i) e.handle(completion(t.posts[i].first, t.posts[i].second, now + 10us));
    auto next = e.next_deadline(now);
    now = next > now ? std::min(next, until) : now + 1ms;
  }
}

// Brings one link up: first tick connects, then the transport reports success.
std::uint64_t up(Engine& e, FakeTransport& t, TimePoint at) {
  t.now = at;
  tick(e, t, at);
  REQUIRE(!t.connects.empty());
  auto id = t.connects.back().link;
  e.handle(connected(id, at));
  return id;
}
// Peer "b" only: connects and runs to the first probe (it comes within one interval).
std::uint64_t first_probe(Engine& e, FakeTransport& t) {
  e.set_peers({peer("b")}, T0);
  auto link = up(e, t, T0);
  run_until(e, t, T0, T0 + 1001ms);
  REQUIRE(t.posts.size() == 1);
  return link;
}
}  // namespace

TEST_CASE("a link connects, probes once per interval with jitter, and records exact RTTs") {
  FakeTransport t;
  Engine e(config(), t, {kPort});
  e.set_peers({peer("b")}, T0);
  auto link = up(e, t, T0);
  CHECK(e.state("b", kPort) == Engine::State::kUp);

  // Each post completes 30 µs later.
  TimePoint now = T0;
  std::vector<TimePoint> post_times;
  while (post_times.size() < 200) {
    auto next = e.next_deadline(now);
    REQUIRE(next >= now);
    now = next;
    t.now = now;
    auto before = t.posts.size();
    tick(e, t, now);
    if (t.posts.size() > before) {
      post_times.push_back(now);
      e.handle(completion(link, t.posts.back().second, now + 30us));
    }
  }
  REQUIRE(post_times.front() < T0 + 1000ms);  // the first probe comes within one interval
  double total = 0;
  for (std::size_t i = 1; i < post_times.size(); ++i) {
    const double gap = Seconds(post_times[i] - post_times[i - 1]).count();
    CHECK(gap >= 0.9 - 1e-6);
    CHECK(gap <= 1.1 + 1e-6);
    total += gap;
  }
  CHECK(total / 199 == Approx(1.0).epsilon(0.02));  // jitter averages out, no drift

  auto s = e.snapshot();
  REQUIRE(s.peers.size() == 1);
  const auto& st = s.peers[0].stats;
  CHECK(st.sent == 200);
  CHECK(st.lost == 0);
  CHECK(st.rtt.count == 200);
  CHECK(st.rtt.sum == Approx(200 * 30e-6));
  // 30 µs falls into the 50 µs bucket (index 5 of 1,2,5,10,20,50 µs ...)
  CHECK(st.rtt.counts[5] == 200);
  CHECK(s.peers[0].up);
  CHECK(st.connects == 1);
}

TEST_CASE("jitter-free schedule is exact") {
  FakeTransport t;
  Engine e(no_jitter(), t, {kPort});
  e.set_peers({peer("b")}, T0);
  auto link = up(e, t, T0);
  run_until(e, t, T0, T0 + 10500ms, true);
  // One probe per second after the first: 10 or 11 depending on the random first offset.
  CHECK(t.posts.size() >= 10);
  CHECK(t.posts.size() <= 11);
  for (auto [l, p] : t.posts) CHECK(l == link);
}

TEST_CASE("a probe without completion is lost after the timeout and the peer is down until one succeeds") {
  FakeTransport t;
  Engine e(no_jitter(), t, {kPort});
  auto link = first_probe(e, t);
  const TimePoint posted = t.now;
  run_until(e, t, t.now, posted + 499ms);
  CHECK(e.snapshot().peers[0].stats.lost == 0);
  run_until(e, t, t.now, posted + 500ms + 1ms);
  auto s = e.snapshot();
  CHECK(s.peers[0].stats.lost == 1);
  CHECK_FALSE(s.peers[0].up);
  // A late completion of the lost probe is not an RTT sample.
  e.handle(completion(link, t.posts[0].second, posted + 600ms));
  s = e.snapshot();
  CHECK(s.late_completions == 1);
  CHECK(s.peers[0].stats.rtt.count == 0);
  // The next probe succeeds: up again.
  run_until(e, t, t.now, posted + 1001ms);
  REQUIRE(t.posts.size() == 2);
  e.handle(completion(link, t.posts[1].second, t.now + 10us));
  s = e.snapshot();
  CHECK(s.peers[0].up);
  CHECK(s.peers[0].stats.rtt.count == 1);
  CHECK(s.peers[0].stats.lost == 1);
}

TEST_CASE("an error completion tears the QP down and reconnects with exponential backoff") {
  FakeTransport t;
  Engine e(no_jitter(), t, {kPort});
  auto link = first_probe(e, t);
  TimePoint at = t.now + 500us;
  e.handle(completion(link, t.posts[0].second, at, false, "completion_retry_exceeded"));
  CHECK(e.state("b", kPort) == Engine::State::kBackoff);
  CHECK(t.closed == std::vector<std::uint64_t>{link});
  auto s = e.snapshot();
  CHECK(s.peers[0].stats.lost == 1);
  CHECK(s.peers[0].stats.errors.at("completion_retry_exceeded") == 1);
  CHECK_FALSE(s.peers[0].up);

  // Reconnects after 1 s, then failures double the wait: 2 s, 4 s, 4 s (max).
  std::vector<double> waits;
  TimePoint failed = at;
  for (int i = 0; i < 4; ++i) {
    auto before = t.connects.size();
    TimePoint now = failed;
    while (t.connects.size() == before) {
      t.now = now;
      tick(e, t, now);
      now = std::max(e.next_deadline(now), now + 1us);
    }
    waits.push_back(Seconds(t.now - failed).count());
    TransportEvent f;
    f.kind = TransportEvent::Kind::kConnectFailed;
    f.link = t.connects.back().link;
    f.reason = "connect";
    f.at = t.now;
    e.handle(f);
    failed = f.at;
  }
  CHECK(waits == std::vector<double>{1.0, 2.0, 4.0, 4.0});
  CHECK(e.snapshot().peers[0].stats.errors.at("connect") == 4);
  // Measure the backoff precisely now: retry at failed + 4 s (max), not before.
  auto before = t.connects.size();
  run_until(e, t, failed, failed + 3999ms);
  CHECK(t.connects.size() == before);
  run_until(e, t, t.now, failed + 4001ms);
  CHECK(t.connects.size() == before + 1);
  // A success, then a good probe, resets the backoff to 1 s.
  e.handle(connected(t.connects.back().link, t.now));
  const auto good_before = e.snapshot().peers[0].stats.rtt.count;
  run_until(e, t, t.now, t.now + 1001ms, true);
  CHECK(e.snapshot().peers[0].stats.rtt.count == good_before + 1);
  at = t.now + 1ms;
  e.handle(completion(link, 999999, at));  // unknown probe: ignored as late
  tick(e, t, at);
  run_until(e, t, at, at + 1001ms);
  REQUIRE(t.posts.size() >= 3);
  e.handle(completion(link, t.posts.back().second, t.now, false, "completion_flushed"));
  before = t.connects.size();
  failed = t.now;
  run_until(e, t, failed, failed + 999ms);
  CHECK(t.connects.size() == before);
  run_until(e, t, t.now, failed + 1001ms);
  CHECK(t.connects.size() == before + 1);
}

TEST_CASE("connect timeout, failed post and stalled QPs are errors, never crashes") {
  FakeTransport t;
  auto c = no_jitter();
  c.connect_timeout = 2000ms;
  c.max_in_flight = 2;
  Engine e(c, t, {kPort});
  e.set_peers({peer("b")}, T0);
  run_until(e, t, T0, T0 + 2001ms);
  auto s = e.snapshot();
  CHECK(s.peers[0].stats.errors.at("connect_timeout") == 1);
  CHECK(e.state("b", kPort) == Engine::State::kBackoff);
  // A connect result that arrives after the timeout is ignored.
  e.handle(connected(t.connects.back().link, T0 + 2100ms));
  CHECK(e.state("b", kPort) == Engine::State::kBackoff);

  run_until(e, t, t.now, T0 + 3001ms + 1ms);
  REQUIRE(t.connects.size() == 2);
  e.handle(connected(t.connects.back().link, t.now));
  t.fail_post = true;
  run_until(e, t, t.now, t.now + 1001ms);
  CHECK(e.snapshot().peers[0].stats.errors.at("post") == 1);

  // Stalled: probes that never complete pile up to max_in_flight -> teardown.
  t.fail_post = false;
  run_until(e, t, t.now, t.now + 2001ms);
  e.handle(connected(t.connects.back().link, t.now));
  run_until(e, t, t.now, t.now + 3500ms);
  s = e.snapshot();
  CHECK(s.peers[0].stats.errors.at("stalled") == 1);
  CHECK(s.peers[0].stats.lost == s.peers[0].stats.sent);
}

TEST_CASE("a responder that says 'self' excludes the link for good") {
  FakeTransport t;
  Engine e(config(), t, {kPort});
  e.set_peers({peer("me")}, T0);
  t.now = T0;
  tick(e, t, T0);
  TransportEvent f;
  f.kind = TransportEvent::Kind::kConnectFailed;
  f.link = t.connects.back().link;
  f.reason = "rejected_self";
  f.self = true;
  f.at = T0;
  e.handle(f);
  run_until(e, t, T0, T0 + 60s);
  CHECK(t.connects.size() == 1);
  auto s = e.snapshot();
  CHECK(s.peers.empty());
  CHECK(s.self_excluded == 1);
}

TEST_CASE("peers that leave lose their link and series, a returning peer starts afresh") {
  FakeTransport t;
  t.locals = {kPort, {"rxe1", 1}};
  Engine e(config(), t, {kPort, {"rxe1", 1}});
  auto b = peer("b");
  b.local_device = "rxe1";  // per-peer local device selection
  e.set_peers({peer("a"), b}, T0);
  t.now = T0;
  tick(e, t, T0);
  CHECK(t.connects.size() == 3);  // a on both ports, b only from rxe1
  for (const auto& c : t.connects) e.handle(connected(c.link, T0));
  CHECK(e.snapshot().peers.size() == 3);
  e.set_peers({b}, T0 + 1s);
  CHECK(t.closed.size() == 2);
  auto s = e.snapshot();
  REQUIRE(s.peers.size() == 1);
  CHECK(s.peers[0].peer == "b");
  CHECK(s.peers[0].local.device == "rxe1");
  e.set_peers({peer("a"), b}, T0 + 2s);
  tick(e, t, T0 + 2s);
  CHECK(t.connects.size() == 5);
  CHECK(e.snapshot().peers.size() == 3);
}

TEST_CASE("beyond max_peers: a rotating sample, histograms per group, bounded series") {
  FakeTransport t;
  auto c = config();
  c.max_peers = 4;
  c.sample_size = 3;
  c.rotate_interval = 60s;
  Engine e(c, t, {kPort});
  std::vector<PeerSpec> peers;
  for (int i = 0; i < 10; ++i) peers.push_back(peer("p" + std::to_string(i), i < 5 ? "rack1" : "rack2"));
  e.set_peers(peers, T0);
  t.now = T0;
  tick(e, t, T0);
  REQUIRE(t.connects.size() == 3);
  std::set<std::string> sampled;
  for (const auto& r : t.connects) {
    sampled.insert(r.peer.name);
    e.handle(connected(r.link, T0));
  }
  CHECK(sampled == std::set<std::string>{"p0", "p1", "p2"});
  run_until(e, t, T0, T0 + 1100ms, true);
  auto s = e.snapshot();
  CHECK(s.aggregated);
  CHECK(s.peers.empty());
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[0].group == "rack1");
  CHECK(s.groups[0].peers == 5);
  CHECK(s.groups[0].probed == 3);
  CHECK(s.groups[0].up == 3);
  CHECK(s.groups[0].stats.sent >= 3);
  CHECK(s.groups[0].stats.lost == 0);
  CHECK(s.groups[0].stats.rtt.count == s.groups[0].stats.sent);
  CHECK(s.groups[1].probed == 0);
  CHECK(s.groups[1].peers == 5);

  // After the rotate interval the next window is probed; group counters keep counting.
  run_until(e, t, t.now, T0 + 59900ms, true);
  const auto sent_before = e.snapshot().groups[0].stats.sent;
  const auto first_new = t.connects.size();
  run_until(e, t, t.now, T0 + 61s, true);
  sampled.clear();
  for (std::size_t i = first_new; i < t.connects.size(); ++i) sampled.insert(t.connects[i].peer.name);
  CHECK(sampled == std::set<std::string>{"p3", "p4", "p5"});
  s = e.snapshot();
  CHECK(s.groups[0].stats.sent >= sent_before);  // rack1 keeps its counters across the rotation
  CHECK(s.groups[0].probed == 2);
  CHECK(s.groups[1].probed == 1);
  CHECK(s.links == 3);
}

TEST_CASE("the QP limit caps links") {
  FakeTransport t;
  auto c = config();
  c.max_links = 2;
  Engine e(c, t, {kPort});
  e.set_peers({peer("a"), peer("b"), peer("c")}, T0);
  tick(e, t, T0);
  CHECK(t.connects.size() == 2);
  auto s = e.snapshot();
  CHECK(s.links == 2);
  CHECK(s.link_limit_hits == 1);
}

TEST_CASE("histogram buckets use le semantics") {
  Histogram h;
  std::vector<double> b{1e-6, 1e-5};
  h.observe(b, 1e-6);
  h.observe(b, 2e-6);
  h.observe(b, 1.0);
  CHECK(h.counts == std::vector<std::uint64_t>{1, 1, 1});
  CHECK(h.count == 3);
  CHECK(std::is_sorted(kDefaultBuckets.begin(), kDefaultBuckets.end()));
  CHECK(kDefaultBuckets.front() == 1e-6);
  CHECK(kDefaultBuckets.back() == 0.1);
}

// tick() skips its scan when nothing is due and computes next_deadline() during its scan: an
// engine ticked only at its own deadlines must do exactly what one ticked every 50 µs does
// (same posts at the same times, same connects), through connects, completions, error
// completions (teardown, backoff, reconnect) and lost probes.
TEST_CASE("ticking only at next_deadline() does the same as ticking often (the due-time heap)") {
  struct Run {
    FakeTransport t;
    Engine e;
    std::vector<std::tuple<std::uint64_t, std::uint64_t, TimePoint>> posts;  // link, probe, time
    std::vector<std::pair<std::uint64_t, TimePoint>> connects;
    std::vector<TransportEvent> pending;
    explicit Run(EngineConfig c) : e(c, t, {kPort}) {}
    void step(TimePoint now) {
      // Deliver what is due: connects succeed 2 ms after the request; a probe completes 30 µs
      // after its post, every 7th with an error, every 11th never (lost).
      std::vector<TransportEvent> due;
      std::erase_if(pending, [&](const TransportEvent& ev) { return ev.at <= now ? (due.push_back(ev), true) : false; });
      for (const auto& ev : due) e.handle(ev);
      t.now = now;
      auto pc = t.posts.size(), cc = t.connects.size();
      tick(e, t, now);
      for (auto i = cc; i < t.connects.size(); ++i) {
        connects.emplace_back(t.connects[i].link, now);
        pending.push_back(connected(t.connects[i].link, now + 2ms));
      }
      for (auto i = pc; i < t.posts.size(); ++i) {
        auto [link, probe] = t.posts[i];
        posts.emplace_back(link, probe, now);
        if (probe % 11 == 0) continue;
        pending.push_back(completion(link, probe, now + 30us, probe % 7 != 0, "completion_retry_exceeded"));
      }
    }
    TimePoint next(TimePoint now) const {
      TimePoint n = e.next_deadline(now);
      for (const auto& ev : pending) n = std::min(n, ev.at);
      return n;
    }
  };
  std::vector<PeerSpec> peers;
  for (int i = 0; i < 20; ++i) peers.push_back(peer("p" + std::to_string(i)));
  Run sparse(config()), dense(config());
  sparse.e.set_peers(peers, T0);
  dense.e.set_peers(peers, T0);
  const TimePoint end = T0 + 30s;
  for (TimePoint now = T0; now < end;) {
    sparse.step(now);
    auto n = sparse.next(now);
    now = n > now ? n : now + 1us;
  }
  for (TimePoint now = T0; now < end;) {
    dense.step(now);
    auto n = dense.next(now);
    now = std::min(n > now ? n : now + 1us, now + 50us);
  }
  REQUIRE(sparse.posts.size() > 400);
  CHECK(sparse.posts == dense.posts);
  CHECK(sparse.connects == dense.connects);
  auto a = sparse.e.snapshot(), b = dense.e.snapshot();
  REQUIRE(a.peers.size() == b.peers.size());
  for (std::size_t i = 0; i < a.peers.size(); ++i) {
    CHECK(a.peers[i].stats.sent == b.peers[i].stats.sent);
    CHECK(a.peers[i].stats.lost == b.peers[i].stats.lost);
    CHECK(a.peers[i].stats.errors == b.peers[i].stats.errors);
  }
}

TEST_CASE("links due at the same time are served in link order, and a link removed while queued is never due") {
  FakeTransport t;
  Engine e(no_jitter(), t, {kPort});
  e.set_peers({peer("a"), peer("b"), peer("c")}, T0);
  tick(e, t, T0);
  REQUIRE(t.connects.size() == 3);
  std::vector<std::uint64_t> ids;
  for (const auto& c : t.connects) ids.push_back(c.link);
  CHECK(std::is_sorted(ids.begin(), ids.end()));
  // All three fail at the same time, reported in reverse order: equal retry times.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    TransportEvent f;
    f.kind = TransportEvent::Kind::kConnectFailed;
    f.link = *it;
    f.at = T0;
    e.handle(f);
  }
  CHECK(e.next_deadline(T0) == T0 + 1s);
  t.connects.clear();
  t.now = T0 + 1s;
  tick(e, t, T0 + 1s);
  REQUIRE(t.connects.size() == 3);
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(t.connects[i].link == ids[i]);

  // "a" fails again at once, "c" half a second later: "a" is due first; removing it leaves "c".
  TransportEvent f;
  f.kind = TransportEvent::Kind::kConnectFailed;
  f.link = ids[0];
  f.at = T0 + 1s;
  e.handle(f);
  f.link = ids[2];
  f.at = T0 + 1500ms;
  e.handle(f);
  e.handle(connected(ids[1], T0 + 1s));
  e.set_peers({peer("b"), peer("c")}, T0 + 1500ms);
  CHECK(!e.state("a", kPort));
  const auto next = e.next_deadline(T0 + 1500ms);
  CHECK(next > T0 + 1500ms);  // nothing of "a" (retry at 2 s, a missed probe at 2 s) is left due
  t.connects.clear();
  run_until(e, t, T0 + 1500ms, T0 + 10s, true);
  for (const auto& c : t.connects) CHECK(c.link != ids[0]);
  for (const auto& [link, probe] : t.posts) CHECK(link != ids[0]);
  CHECK(std::any_of(t.connects.begin(), t.connects.end(), [&](const ConnectRequest& c) { return c.link == ids[2]; }));
}

TEST_CASE("a local port that leaves ACTIVE parks its links: not probed, nothing lost, back when ACTIVE") {
  FakeTransport t;
  const LocalPort other{"rxe1", 1};
  t.locals = {kPort, other};
  Engine e(no_jitter(), t, {kPort, other});
  auto port_state = [](const LocalPort& l, bool active) {
    TransportEvent ev;
    ev.kind = TransportEvent::Kind::kPortState;
    ev.local = l;
    ev.ok = active;
    return ev;
  };
  e.set_peers({peer("b")}, T0);
  t.now = T0;
  tick(e, t, T0);
  REQUIRE(t.connects.size() == 2);
  for (const auto& c : t.connects) e.handle(connected(c.link, T0));
  const auto link = t.connects[0].local == kPort ? t.connects[0].link : t.connects[1].link;
  run_until(e, t, T0, T0 + 1001ms);  // one probe on each link, in flight
  REQUIRE(t.posts.size() == 2);

  // kPort goes DOWN with a probe in flight: its link is closed, the probe is dropped uncounted.
  e.handle(port_state(kPort, false));
  CHECK(e.state("b", kPort) == Engine::State::kIdle);
  CHECK(t.closed == std::vector<std::uint64_t>{link});
  CHECK_FALSE(e.local_up(kPort));
  const auto posts_before = t.posts.size(), connects_before = t.connects.size();
  run_until(e, t, t.now, T0 + 10s, true);
  auto s = e.snapshot();
  for (const auto& v : s.peers) {
    if (v.local == kPort) {
      CHECK_FALSE(v.local_up);
      CHECK(v.stats.lost == 0);
      CHECK(v.stats.sent == 1);
      CHECK(v.stats.errors.empty());
    } else {
      CHECK(v.local_up);
      CHECK(v.up);
      CHECK(v.stats.sent > 5);
    }
  }
  CHECK(s.local_ports == std::vector<std::pair<LocalPort, bool>>{{kPort, false}, {other, true}});
  for (auto i = posts_before; i < t.posts.size(); ++i) CHECK(t.posts[i].first != link);  // only the other port probed
  CHECK(t.connects.size() == connects_before);                                           // and no reconnect attempt
  // A late completion of the dropped probe is ignored, a failed one too (a post on a port going down
  // fails: the transport puts the port's new state ahead of it); a repeated DOWN changes nothing.
  e.handle(completion(link, t.posts[0].second, t.now));
  e.handle(completion(link, t.posts[0].second, t.now, false, "completion_local_qp_operation"));
  e.handle(port_state(kPort, false));
  CHECK(t.closed.size() == 1);
  for (const auto& v : e.snapshot().peers)
    if (v.local == kPort) CHECK((v.stats.lost == 0 && v.stats.errors.empty()));

  // ACTIVE again: it connects at once and probes; the statistics continue where they were.
  e.handle(port_state(kPort, true));
  CHECK(e.local_up(kPort));
  t.now += 1ms;
  tick(e, t, t.now);
  REQUIRE(t.connects.size() == connects_before + 1);
  CHECK(t.connects.back().local == kPort);
  e.handle(connected(t.connects.back().link, t.now));
  run_until(e, t, t.now, t.now + 3s, true);
  for (const auto& v : e.snapshot().peers)
    if (v.local == kPort) {
      CHECK(v.up);
      CHECK(v.stats.sent >= 3);
      CHECK(v.stats.lost == 0);
      CHECK(v.stats.connects == 2);
    }
}

TEST_CASE("flows: several QPs per link, one peer view, per-flow windows for localization, rotation") {
  FakeTransport t;
  auto c = no_jitter();
  c.flows = 3;
  c.window = 10s;
  c.flow_rotation = 20s;
  Engine e(c, t, {kPort});
  e.set_peers({peer("b")}, T0);
  // Flow 1 is on a dead path: its probes never complete and, once torn down, its reconnects
  // fail. The other flows complete every probe and connect at once.
  std::size_t answered = 0;
  auto advance = [&](TimePoint until) {
    TimePoint now = t.now;
    while (now < until) {
      t.now = now;
      auto before = t.posts.size();
      tick(e, t, now);
      for (; answered < t.connects.size(); ++answered) {
        const auto& r = t.connects[answered];
        TransportEvent ev = connected(r.link, now);
        if (r.flow == 1 && answered >= 3) ev.kind = TransportEvent::Kind::kConnectFailed, ev.reason = "connect";
        e.handle(ev);
      }
      for (auto i = before; i < t.posts.size(); ++i) {
        bool dead = false;
        for (const auto& r : t.connects) dead = dead || (r.link == t.posts[i].first && r.flow == 1);
        if (!dead) e.handle(completion(t.posts[i].first, t.posts[i].second, now + 10us));
      }
      auto next = e.next_deadline(now);
      now = next > now ? std::min(next, until) : now + 1ms;
    }
    t.now = until;
    tick(e, t, until);
  };
  t.now = T0;
  advance(T0 + 1ms);
  REQUIRE(t.connects.size() == 3);
  std::set<unsigned> flows;
  for (const auto& r : t.connects) flows.insert(r.flow);
  CHECK(flows == std::set<unsigned>{0, 1, 2});

  advance(T0 + 10s + 1ms);
  auto s = e.snapshot();
  REQUIRE(s.peers.size() == 1);  // the flows of a link are one peer view
  CHECK(s.peers[0].up);          // some flow works
  CHECK(s.windows == 1);
  REQUIRE(s.window.size() == 3);
  std::uint64_t good_sent = 0;
  for (const auto& f : s.window) {
    CHECK(f.device == "rxe0");
    CHECK(f.port == 1);
    CHECK(f.peer == "b");
    CHECK(f.local_port_up);
    CHECK(f.sent >= 9);
    CHECK(f.sent <= 11);
    if (f.flow == 1) {
      CHECK(f.lost >= f.sent - 1);  // all but the last, whose timeout falls in the next window
    } else {
      CHECK(f.lost == 0);
      good_sent += f.sent;
    }
  }
  CHECK(s.peers[0].stats.sent >= good_sent);  // the peer's statistics sum its flows

  // Flow 1 stalled (probes stuck in flight) and cannot reconnect: the probes due meanwhile count
  // as sent and lost in its window, not as silence; the other flows stay clean.
  advance(T0 + 19s);
  CHECK(e.state("b", kPort, 1) != Engine::State::kUp);
  CHECK(t.connects.size() > 3);
  for (auto i = std::size_t{3}; i < t.connects.size(); ++i) CHECK(t.connects[i].flow == 1);

  // Rotation at T0 + 20 s re-creates flow 0 of the link: closed, connected again, probing.
  const auto connects_before = t.connects.size();
  std::uint64_t flow0 = 0;
  for (const auto& r : t.connects)
    if (r.flow == 0) flow0 = r.link;
  CHECK(std::find(t.closed.begin(), t.closed.end(), flow0) == t.closed.end());
  advance(T0 + 20s + 1ms);
  CHECK(std::find(t.closed.begin(), t.closed.end(), flow0) != t.closed.end());
  bool rotated = false;
  for (auto i = connects_before; i < t.connects.size(); ++i) rotated = rotated || t.connects[i].flow == 0;
  CHECK(rotated);
  CHECK(e.state("b", kPort, 0) == Engine::State::kUp);
  CHECK(e.state("b", kPort, 2) == Engine::State::kUp);
  s = e.snapshot();
  CHECK(s.windows == 2);
  for (const auto& f : s.window)
    if (f.flow == 1) {
      CHECK(f.sent >= 9);
      CHECK(f.lost == f.sent);
    } else {
      CHECK(f.lost == 0);
    }
  // The next rotation takes flow 1 (not up: nothing to re-create), then flow 2.
  advance(T0 + 60s + 1ms);
  CHECK(e.state("b", kPort, 2) == Engine::State::kUp);
}

namespace {
TransportEvent paired(std::uint64_t request, TimePoint at, std::vector<PeerPort> pairs, std::string reason = "") {
  TransportEvent e;
  e.kind = TransportEvent::Kind::kPaired;
  e.link = request;
  e.ok = reason.empty();
  e.reason = std::move(reason);
  e.at = at;
  e.pairs = std::move(pairs);
  return e;
}
}  // namespace

TEST_CASE("a peer's links are its pairs: one per paired port and flow, each connecting to its peer port on its rail") {
  FakeTransport t;
  t.answer_pairings = false;
  const LocalPort a1{"rxeA1", 1}, a2{"rxeA2", 1}, a3{"rxeA3", 1};
  auto c = no_jitter();
  c.flows = 2;
  c.pairing_refresh = 60s;
  Engine e(c, t, {a1, a2, a3});
  e.set_peers({peer("b")}, T0);
  e.tick(T0);
  REQUIRE(t.pairings.size() == 1);  // nothing connects before the peer's ports are known
  CHECK(t.connects.empty());
  CHECK(e.snapshot().peers_unpaired == 1);
  const Gid s1{1}, d1{2}, s2{3}, d2{4};
  // a3 has no rail in common with b: it probes nothing
  e.handle(paired(t.pairings[0].first, T0, {{a1, "rxeB1", 1, "rail1", s1, d1}, {a2, "rxeB2", 1, "rail2", s2, d2}}));
  e.tick(T0);
  REQUIRE(t.connects.size() == 4);
  std::set<std::tuple<std::string, std::string, unsigned>> got;
  for (const auto& r : t.connects) {
    CHECK(r.target.local == r.local);
    got.insert({r.local.device, r.target.device, r.flow});
    CHECK(r.target.source == (r.local == a1 ? s1 : s2));
    CHECK(r.target.dest == (r.local == a1 ? d1 : d2));
  }
  CHECK(got == std::set<std::tuple<std::string, std::string, unsigned>>{
                   {"rxeA1", "rxeB1", 0}, {"rxeA1", "rxeB1", 1}, {"rxeA2", "rxeB2", 0}, {"rxeA2", "rxeB2", 1}});
  for (const auto& r : t.connects) e.handle(connected(r.link, T0));
  run_until(e, t, T0, T0 + 31s, true);
  auto s = e.snapshot();
  CHECK(s.peers_unpaired == 0);
  CHECK(s.paired == std::vector<std::pair<std::string, bool>>{{"b", true}});
  REQUIRE(s.link_info.size() == 2);
  CHECK(s.link_info[0].pair.rail != s.link_info[1].pair.rail);
  REQUIRE(s.window.size() == 4);
  for (const auto& f : s.window) {
    CHECK(f.rail == (f.device == "rxeA1" ? "rail1" : "rail2"));
    CHECK(f.peer_device == (f.device == "rxeA1" ? "rxeB1" : "rxeB2"));
    CHECK(f.sent > 0);
  }
  CHECK(s.peers.size() == 2);  // per local port and peer

  SECTION("asked again every pairing_refresh: the same pairs keep their links, a changed table moves them") {
    REQUIRE(t.pairings.size() == 1);  // the ask at T0 was answered
    t.pairings.clear();
    const auto closed_before = t.closed.size();
    run_until(e, t, T0 + 31s, T0 + 61s, true);
    REQUIRE(t.pairings.size() == 1);
    e.handle(paired(t.pairings[0].first, T0 + 61s, {{a1, "rxeB1", 1, "rail1", s1, d1}, {a2, "rxeB2", 1, "rail2", s2, d2}}));
    CHECK(t.closed.size() == closed_before);
    // b's rail 2 port is gone; its rail 3 port pairs with a3
    t.connects.clear();
    run_until(e, t, T0 + 61s, T0 + 122s, true);
    REQUIRE(t.pairings.size() == 2);
    e.handle(paired(t.pairings[1].first, T0 + 122s, {{a1, "rxeB1", 1, "rail1", s1, d1}, {a3, "rxeB3", 1, "rail3", {}, {}}}));
    CHECK(e.next_deadline(T0 + 122s) == T0 + 122s);  // the links follow at the next tick
    e.tick(T0 + 122s);
    CHECK(t.closed.size() == closed_before + 2);  // a2's two flows
    REQUIRE(t.connects.size() == 2);
    for (const auto& r : t.connects) CHECK((r.local == a3 && r.target.device == "rxeB3"));
  }
  SECTION("a peer that stops answering keeps its pairs: its links fail and count lost") {
    t.pairings.clear();
    run_until(e, t, T0 + 31s, T0 + 61s);  // probes are lost from here on
    REQUIRE(t.pairings.size() == 1);
    e.handle(paired(t.pairings[0].first, T0 + 61s, {}, "pairing_connect"));
    run_until(e, t, T0 + 61s, T0 + 95s);
    s = e.snapshot();
    CHECK(s.links == 4);
    CHECK(s.peers_unpaired == 0);
    CHECK(s.pairing_failures.at("pairing_connect") == 1);
    for (const auto& f : s.window) CHECK(f.lost == f.sent);
  }
}

TEST_CASE("a peer never paired has no links and is asked again with backoff") {
  FakeTransport t;
  t.answer_pairings = false;
  auto c = no_jitter();
  c.backoff_max = 30s;
  Engine e(c, t, {kPort});  // backoff 1 s doubling, at most 30 s
  e.set_peers({peer("b")}, T0);
  std::vector<TimePoint> asked;
  TimePoint now = T0;
  while (now < T0 + 40s) {
    e.tick(now);
    for (const auto& [request, p] : std::exchange(t.pairings, {})) {
      asked.push_back(now);
      e.handle(paired(request, now, {}, "pairing_connect"));
    }
    now = std::max(e.next_deadline(now), now + 1ms);
  }
  CHECK(t.connects.empty());
  const std::vector<TimePoint> want{T0, T0 + 1s, T0 + 3s, T0 + 7s, T0 + 15s, T0 + 31s};
  CHECK(asked == want);
  auto s = e.snapshot();
  CHECK(s.peers_unpaired == 1);
  CHECK(s.paired == std::vector<std::pair<std::string, bool>>{{"b", false}});
  CHECK(s.pairing_failures.at("pairing_connect") == 6);
  CHECK(s.window.empty());
  // an answer for a peer that left is dropped
  e.tick(now);
  REQUIRE(t.pairings.empty());
  e.set_peers({}, now);
  e.handle(paired(99, now, {{kPort, "x", 1, "", {}, {}}}));
  CHECK(e.snapshot().links == 0);
}

TEST_CASE("with a wake grid, probes due within one step share a wake-up and are at most one step late") {
  FakeTransport t;
  auto c = config();  // 1 s interval, +-10 % jitter
  c.wake_grid = 10ms;
  c.max_peers = 200;
  Engine e(c, t, {kPort});
  std::vector<PeerSpec> peers;
  for (int i = 0; i < 200; ++i) peers.push_back(peer("p" + std::to_string(i)));
  e.set_peers(peers, T0);
  tick(e, t, T0);
  REQUIRE(t.connects.size() == 200);
  for (const auto& r : t.connects) e.handle(connected(r.link, T0));
  // the posts: when, per link
  std::map<std::uint64_t, std::vector<TimePoint>> at;
  std::set<TimePoint> wakeups;
  TimePoint now = T0;
  while (now < T0 + 20s) {
    const auto before = t.posts.size();
    t.now = now;
    e.tick(now);
    for (auto i = before; i < t.posts.size(); ++i) {
      at[t.posts[i].first].push_back(now);
      e.handle(completion(t.posts[i].first, t.posts[i].second, now + 10us));
    }
    if (t.posts.size() > before) wakeups.insert(now);
    const auto next = e.next_deadline(now);
    if (next > now) CHECK((next - TimePoint{}) % 10ms == Clock::duration::zero());  // on the grid
    now = std::max(next, now + 1ms);
  }
  REQUIRE(at.size() == 200);
  std::size_t probes = 0;
  for (const auto& [link, times] : at) {
    probes += times.size();
    for (std::size_t i = 1; i < times.size(); ++i) {
      const auto gap = times[i] - times[i - 1];
      CHECK(gap >= 900ms - 10ms);  // the jittered interval, moved by at most one step each end
      CHECK(gap <= 1100ms + 10ms);
    }
  }
  CHECK(probes >= 200 * 18);
  CHECK(wakeups.size() <= 20s / 10ms + 1);  // ~4,000 probes in at most 2,001 wake-ups
  CHECK(wakeups.size() < probes / 2);
}

TEST_CASE("flows: each flow has its own flow label spread over the source ports which reconnects keep and rotation moves") {
  FakeTransport t;
  auto c = no_jitter();
  c.flows = 4;
  c.flow_rotation = 20s;
  Engine e(c, t, {kPort});
  e.set_peers({peer("b")}, T0);
  t.now = T0;
  tick(e, t, T0);
  REQUIRE(t.connects.size() == 4);
  std::map<unsigned, std::uint32_t> label;  // flow -> label
  for (const auto& r : t.connects) {
    CHECK(r.flow_label != 0);
    CHECK((flow_label_to_udp_sport(r.flow_label) - 0xC000u) / 0x1000 == r.flow);  // flow f in quarter f
    label[r.flow] = r.flow_label;
  }
  CHECK(label.size() == 4);
  // Flow 2 fails to connect: its reconnect asks for the same label (same 5-tuple, same path).
  for (const auto& r : t.connects) {
    TransportEvent ev = connected(r.link, T0);
    if (r.flow == 2) ev.kind = TransportEvent::Kind::kConnectFailed, ev.reason = "connect";
    e.handle(ev);
  }
  for (TimePoint now = T0; now < T0 + 21s; now += 100ms) {
    t.now = now;
    tick(e, t, now);
    for (std::size_t i = 4; i < t.connects.size(); ++i) e.handle(connected(t.connects[i].link, now));
    for (const auto& [link, probe] : t.posts) e.handle(completion(link, probe, now + 10us));
    t.posts.clear();
  }
  bool reconnected = false, rotated = false;
  for (std::size_t i = 4; i < t.connects.size(); ++i) {
    const auto& r = t.connects[i];
    if (r.flow == 2) {
      reconnected = true;
      CHECK(r.flow_label == label[2]);
    }
    if (r.flow == 0) {
      rotated = true;
      CHECK(r.flow_label != label[0]);
      CHECK((flow_label_to_udp_sport(r.flow_label) - 0xC000u) / 0x1000 == 0u);  // still its own quarter
    }
  }
  CHECK(reconnected);
  CHECK(rotated);
}
