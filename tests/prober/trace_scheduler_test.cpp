// The path tracer's scheduling without sockets: a fake PathTracer that sends `packets` packets
// through the pacer on a fake clock, then the engine over a fake transport that reports trace
// targets at connect.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>

#include "collectors/prober/engine/engine.h"
#include "collectors/prober/engine/trace_scheduler.h"
#include "collectors/prober/engine/traces_endpoint.h"
#include "collectors/prober/wire/handshake_io.h"
#include "engine_events.h"
#include "tests/lib/samples.h"

using namespace rdma::collectors::prober;
using namespace std::chrono_literals;
using SClock = TraceScheduler::Clock;

namespace {

struct FakeTime {
  SClock::time_point now = SClock::time_point{} + std::chrono::hours(1);
  TraceScheduler::Clockwork clockwork() {
    return {[this] { return now; }, [this](SClock::time_point t) {
              now = std::max(now, t);
              return true;
            }};
  }
};

struct FakeTracer : PathTracer {
  FakeTime& time;
  unsigned packets = 4;
  std::vector<SClock::time_point> sent;  // every packet's time
  std::vector<TraceTarget> traced;       // in order
  std::function<void()> during;          // runs inside a trace (before its packets)
  // The hops a trace answers (`packets` of them); null: 10.0.0.1, 10.0.0.2, ...
  std::function<std::vector<std::string>(const TraceTarget&)> route;
  std::function<TraceOutcome(const TraceTarget&)> script;  // when set: the outcome (its packets paced)
  std::string failure;
  explicit FakeTracer(FakeTime& t) : time(t) {}
  TraceOutcome trace(const TraceTarget& t, const TraceOptions&, const TracePacer& pace) override {
    traced.push_back(t);
    if (during) during();
    if (script) {
      TraceOutcome o = script(t);
      for (std::uint64_t i = 0; i < o.packets; ++i)
        if (!pace()) return {"stopped"};
      return o;
    }
    TraceOutcome o;
    const auto hops = route ? route(t) : std::vector<std::string>{};
    for (unsigned i = 0; i < (route ? hops.size() : packets); ++i) {
      if (!pace()) return {"stopped"};
      sent.push_back(time.now);
      ++o.packets;
      time.now += 1ms;  // the hop's answer
      ++o.answers;
      o.hops.push_back(route ? hops[i] : "10.0.0." + std::to_string(i + 1));
    }
    o.failure = failure;
    o.complete = failure.empty();
    return o;
  }
};

TraceJob job(std::uint64_t link, bool fresh = false, const std::string& local = "mlx5_0/1") {
  TraceJob j;
  j.link = link;
  j.flow_label = static_cast<std::uint32_t>(link);
  j.local = local;
  j.target.sport = static_cast<std::uint16_t>(0xC000 + link);
  j.fresh = fresh;
  return j;
}

}  // namespace

TEST_CASE("trace_scheduler: packets of one local port never exceed the bucket's bound", "[trace]") {
  FakeTime time;
  FakeTracer tracer(time);
  tracer.packets = 8;
  // Starts unpaced: the packet bucket alone is under test.
  TraceScheduler s({.rate = 10, .burst = 10, .max_queued = 64, .start_interval = 0ms}, tracer, time.clockwork());
  for (std::uint64_t l = 1; l <= 20; ++l) REQUIRE(s.request(job(l)));
  while (s.run_next()) {
  }
  REQUIRE(tracer.sent.size() == 160);
  // In any interval of length T at most burst + rate * T packets (T in seconds).
  for (std::size_t i = 0; i < tracer.sent.size(); ++i)
    for (std::size_t j = i; j < tracer.sent.size(); ++j) {
      const double t = std::chrono::duration<double>(tracer.sent[j] - tracer.sent[i]).count();
      REQUIRE(static_cast<double>(j - i + 1) <= 10 + 10 * t + 1e-9);
    }
  // And it is not slower than needed: 160 packets at 10/s after a burst of 10 take about 15 s.
  const double all = std::chrono::duration<double>(tracer.sent.back() - tracer.sent.front()).count();
  CHECK(all < 15.5);
  CHECK(s.counters().packets == 160);
  CHECK(s.counters().results.at("complete") == 20);
}

TEST_CASE("trace_scheduler: a local port starts at most start_burst traces plus one per start_interval", "[trace]") {
  // What a Linux-based router answers one address: 1 ICMP error per second, a burst of 6. Each
  // trace asks each router on its path for one answer, so starts, not packets, are what it counts.
  FakeTime time;
  FakeTracer tracer(time);
  tracer.packets = 1;
  TraceScheduler s({.rate = 1000, .burst = 1000, .max_queued = 64}, tracer, time.clockwork());
  for (std::uint64_t l = 1; l <= 16; ++l) REQUIRE(s.request(job(l)));
  s.request(job(100, false, "mlx5_1/1"));
  const auto t0 = time.now;
  while (s.run_next()) {
  }
  REQUIRE(tracer.sent.size() == 17);
  std::vector<SClock::time_point> port0;
  for (std::size_t i = 0; i < tracer.traced.size(); ++i)
    if (tracer.traced[i].sport != 0xC000 + 100) port0.push_back(tracer.sent[i]);
  REQUIRE(port0.size() == 16);
  for (std::size_t i = 0; i < port0.size(); ++i)
    for (std::size_t j = i; j < port0.size(); ++j) {
      const double t = std::chrono::duration<double>(port0[j] - port0[i]).count();
      REQUIRE(static_cast<double>(j - i + 1) <= 6 + t + 1e-9);
    }
  // Not slower than needed: 6 at once, then one a second: the 16th about 10 s after the first.
  CHECK(port0.back() - t0 < 10s + 100ms);
  CHECK(port0.back() - t0 >= 10s - 100ms);
}

TEST_CASE("trace_scheduler: local ports have buckets of their own", "[trace]") {
  FakeTime time;
  FakeTracer tracer(time);
  tracer.packets = 10;
  TraceScheduler s({.rate = 1, .burst = 10, .max_queued = 64}, tracer, time.clockwork());
  s.request(job(1, false, "a/1"));
  s.request(job(2, false, "b/1"));
  const auto t0 = time.now;
  while (s.run_next()) {
  }
  // Each port spent its burst: no wait for either (10 answers of 1 ms each).
  CHECK(time.now - t0 < 100ms);
}

TEST_CASE("trace_scheduler: fresh traces go first, one request per link", "[trace]") {
  FakeTime time;
  FakeTracer tracer(time);
  TraceScheduler s({.rate = 100, .burst = 100, .max_queued = 64}, tracer, time.clockwork());
  s.request(job(1));
  s.request(job(2));
  s.request(job(3));
  s.request(job(2, true));  // replaces link 2's plain request, ahead of the others
  s.request(job(3));        // still one for link 3
  CHECK(s.counters().queued == 3);
  while (s.run_next()) {
  }
  REQUIRE(tracer.traced.size() == 3);
  CHECK(tracer.traced[0].sport == 0xC002);
  CHECK(tracer.traced[1].sport == 0xC001);
  CHECK(tracer.traced[2].sport == 0xC003);
  auto done = s.take_results();
  REQUIRE(done.size() == 3);
  CHECK(done[0].job.fresh);
  CHECK(!done[1].job.fresh);
}

TEST_CASE("trace_scheduler: bounded queue, cancel drops waiting and in-flight results", "[trace]") {
  FakeTime time;
  FakeTracer tracer(time);
  TraceScheduler s({.rate = 100, .burst = 100, .max_queued = 4}, tracer, time.clockwork());
  for (std::uint64_t l = 1; l <= 6; ++l) s.request(job(l));
  CHECK(s.counters().queued == 4);
  CHECK(s.counters().queue_full == 2);
  s.cancel(2);
  CHECK(s.counters().queued == 3);
  // A request for the link in flight waits for it (one trace per link at a time); a cancel
  // during the trace drops its result.
  bool once = false;
  tracer.during = [&] {
    if (once) return;
    once = true;
    s.request(job(1));
    s.cancel(1);
  };
  REQUIRE(s.run_next());  // link 1, cancelled while in flight
  CHECK(s.take_results().empty());
  while (s.run_next()) {
  }
  auto done = s.take_results();
  REQUIRE(done.size() == 2);
  CHECK(done[0].job.link == 3);
  CHECK(done[1].job.link == 4);
}

TEST_CASE("trace_scheduler: a per-flow failure is counted by reason, a host one is the state", "[trace]") {
  FakeTime time;
  FakeTracer tracer(time);
  TraceScheduler s({.rate = 100, .burst = 100, .max_queued = 8}, tracer, time.clockwork());
  tracer.packets = 0;
  tracer.failure = "port_in_use";
  s.request(job(1));
  s.run_next();
  CHECK(s.counters().results.at("port_in_use") == 1);
  CHECK(s.counters().state == "available");
  tracer.failure = "permission";
  s.request(job(2));
  s.run_next();
  CHECK(s.counters().state == "permission");
  tracer.failure = "";
  tracer.packets = 2;
  s.request(job(3));
  s.run_next();
  CHECK(s.counters().state == "available");
}

TEST_CASE("trace_scheduler: the worker thread stops within a pacing wait", "[trace]") {
  struct Slow : PathTracer {
    std::atomic<bool> waiting{false};
    TraceOutcome trace(const TraceTarget&, const TraceOptions&, const TracePacer& pace) override {
      TraceOutcome o;
      if (pace()) ++o.packets;  // the burst's one token
      waiting = true;
      while (pace()) ++o.packets;  // the next token is 1000 s away: only stop() ends this wait
      o.failure = "stopped";
      return o;
    }
  } slow;
  TraceScheduler s({.rate = 0.001, .burst = 1, .max_queued = 8}, slow);
  s.start();
  s.request(job(1));
  while (!slow.waiting) std::this_thread::yield();
  s.stop();  // returns (the test's guard is ctest's timeout) once the pacer's sleep is interrupted
  CHECK(s.counters().results.at("stopped") == 1);
  CHECK(s.counters().packets == 1);
}

// --- The engine's side ---

namespace {

struct TraceTransport : Transport {
  std::vector<ConnectRequest> connects;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> posts;
  std::vector<std::pair<std::uint64_t, PeerSpec>> pairings;
  TimePoint now{};
  void connect(const ConnectRequest& r) override { connects.push_back(r); }
  void pair(std::uint64_t request, const PeerSpec& peer) override { pairings.emplace_back(request, peer); }
  std::optional<TimePoint> post_probe(std::uint64_t link, std::uint64_t probe, std::string&) override {
    posts.emplace_back(link, probe);
    return now;
  }
  void close(std::uint64_t) override {}
};

const LocalPort kPort{"rxe0", 1};
const TimePoint T0 = TimePoint{} + 1000s;

TransportEvent connected(const ConnectRequest& r, TimePoint at) {
  TransportEvent e;
  e.kind = TransportEvent::Kind::kConnected;
  e.link = r.link;
  e.at = at;
  TraceTarget t;
  t.source = *address_gid("10.1.0.1");
  t.dest = *address_gid("10.2.0.1");
  t.sport = flow_label_to_udp_sport(r.flow_label);
  t.dest_qpn = 0x100 + static_cast<std::uint32_t>(r.link);
  e.trace = t;
  return e;
}

struct Rig {
  FakeTime time;
  FakeTracer tracer{time};
  TraceScheduler sched{{.rate = 1000, .burst = 1000, .max_queued = 64}, tracer, time.clockwork()};
  TraceTransport t;
  Engine engine;
  std::size_t answered = 0;  // connects answered
  std::set<unsigned> losing;  // flow indexes whose probes never complete
  explicit Rig(EngineConfig c) : engine(c, t, {kPort}) {
    engine.set_tracer(&sched);
    PeerSpec p;
    p.name = p.address = "peer1";
    p.tcp_port = 9662;
    engine.set_peers({p}, T0);
  }
  // One loop round: tick, answer pairings and connects (every connect succeeds), tick.
  void round(TimePoint now, bool complete) {
    t.now = now;
    const auto before = t.posts.size();
    engine.tick(now);
    for (const auto& [request, p] : std::exchange(t.pairings, {}))
      engine.handle(testing::paired(request, {PeerPort{kPort, "rxe1", 1, "r1", {}, {}}}, now));
    for (; answered < t.connects.size(); ++answered) engine.handle(connected(t.connects[answered], now));
    if (complete)
      for (auto i = before; i < t.posts.size(); ++i)
        if (!losing.count(flow_of(t.posts[i].first)))
          engine.handle(testing::completion(t.posts[i].first, t.posts[i].second, now + 10us));
    engine.tick(now);
  }
  unsigned flow_of(std::uint64_t link) const {
    for (const auto& c : t.connects)
      if (c.link == link) return c.flow;
    return ~0u;
  }
  void drain() {
    while (sched.run_next()) {
    }
  }
  void run(TimePoint from, TimePoint until, bool complete) {
    for (TimePoint now = from; now < until; now += 100ms) round(now, complete);
  }
};

EngineConfig trace_config() {
  EngineConfig c;
  c.interval = 1000ms;
  c.jitter = 0;
  c.timeout = 500ms;
  c.seed = 3;
  c.flows = 2;
  c.flow_rotation = 20s;
  c.window = 10s;
  return c;
}

}  // namespace

TEST_CASE("trace_scheduler: the engine traces each new flow once, a rotation forgets and traces anew",
          "[trace]") {
  Rig r(trace_config());
  r.run(T0, T0 + 1s, true);
  REQUIRE(r.t.connects.size() == 2);
  CHECK(r.sched.counters().queued == 2);
  r.drain();
  r.run(T0 + 1s, T0 + 2s, true);
  auto s = r.engine.snapshot();
  REQUIRE(s.traces.size() == 2);
  for (const auto& f : s.traces) {
    CHECK(f.result == "complete");
    REQUIRE(f.path.size() == 5);
    CHECK(f.path.front() == "10.1.0.1");  // the flow's source first
    CHECK(f.sport == flow_label_to_udp_sport(f.flow_label));
    CHECK(f.traced_unix > 0);
  }
  REQUIRE(s.book);
  CHECK(s.book->flows() == 2);
  CHECK(r.sched.counters().queued == 0);
  // The rotation at 20 s re-creates flow 0: its trace is forgotten and it is traced again.
  r.run(T0 + 2s, T0 + 21s, true);
  REQUIRE(r.t.connects.size() == 3);
  CHECK(r.t.connects[2].flow == 0);
  CHECK(r.t.connects[2].flow_label != r.t.connects[0].flow_label);
  CHECK(r.sched.counters().queued == 1);
  s = r.engine.snapshot();
  CHECK(s.book->flows() == 1);
  r.drain();
  CHECK(r.tracer.traced.size() == 3);
  CHECK(r.tracer.traced[2].sport == flow_label_to_udp_sport(r.t.connects[2].flow_label));
}

TEST_CASE("trace_scheduler: a flow judged lossy gets a fresh trace, ahead, a reconnect keeps its trace, clean again drops it", "[trace]") {
  auto c = trace_config();
  c.flow_rotation = 0ms;
  Rig r(c);
  r.run(T0, T0 + 1s, true);
  r.drain();
  r.run(T0 + 1s, T0 + 2s, true);
  const auto traced = r.tracer.traced.size();
  // No completions: every probe is lost, both flows are lossy at the window's end.
  r.run(T0 + 2s, T0 + 10s + 200ms, false);
  CHECK(r.sched.counters().queued == 2);
  // The lost probes stalled the QPs, which reconnected with their labels: no plain trace again.
  CHECK(r.t.connects.size() > 2);
  for (const auto& conn : r.t.connects) CHECK((conn.flow_label == r.t.connects[0].flow_label || conn.flow_label == r.t.connects[1].flow_label));
  while (r.sched.run_next()) {
  }
  CHECK(r.tracer.traced.size() == traced + 2);
  auto done_before = r.engine.snapshot();
  r.run(T0 + 10s + 200ms, T0 + 11s, false);
  auto s = r.engine.snapshot();
  REQUIRE(s.traces.size() == 2);
  for (const auto& f : s.traces) CHECK(f.fresh.size() == 5);
  // Still lossy: no second fresh trace per window. Clean again: the fresh traces go.
  r.run(T0 + 11s, T0 + 20s + 200ms, false);
  CHECK(r.sched.counters().queued == 0);
  r.run(T0 + 20s + 200ms, T0 + 41s, true);
  s = r.engine.snapshot();
  for (const auto& f : s.traces) CHECK(f.fresh.empty());
}

TEST_CASE("trace_scheduler: a path that grew by a hop is a new path: its new hop is kept, no link of the old one named",
          "[trace]") {
  auto c = trace_config();
  c.flow_rotation = 0ms;
  Rig r(c);
  // First traces: flow 0 via R, flow 1 via Q, both reaching the destination.
  std::uint16_t sport0 = 0;
  bool grown = false;
  r.tracer.script = [&](const TraceTarget& t) {
    TraceOutcome o;
    if (t.sport == sport0 && grown) {
      o.hops = {"10.0.0.1", "10.0.0.50", "10.0.0.2"};  // L, the new X, R; the drop after R eats the rest
      o.packets = 5, o.answers = 3;
      return o;
    }
    o.hops = {"10.0.0.1", t.sport == sport0 ? "10.0.0.2" : "10.0.0.3", "10.2.0.1"};
    o.complete = true;
    o.packets = o.answers = 3;
    return o;
  };
  r.run(T0, T0 + 1s, true);
  REQUIRE(r.t.connects.size() == 2);
  sport0 = flow_label_to_udp_sport(r.t.connects[0].flow_label);
  while (r.sched.run_next()) {
  }
  r.run(T0 + 1s, T0 + 2s, true);
  // The path of flow 0 grows by a hop (L X R D) and something after R drops its packets.
  grown = true;
  r.losing = {r.t.connects[0].flow};
  r.run(T0 + 2s, T0 + 10s + 200ms, true);
  while (r.sched.run_next()) {
  }
  r.run(T0 + 10s + 200ms, T0 + 11s, true);
  const auto s = r.engine.snapshot();
  bool seen = false;
  for (const auto& f : s.traces)
    if (f.sport == sport0) {
      seen = true;
      CHECK(f.fresh == std::vector<std::string>{"10.1.0.1", "10.0.0.1", "10.0.0.50", "10.0.0.2"});  // the new hop kept
      CHECK(f.result == "partial");
    }
  CHECK(seen);
  // Read as the old path cut short, the fresh trace would name R -> D (R is there, D after it),
  // a link the flow no longer crosses.
  for (const auto& sl : s.suspects) CHECK_FALSE((sl.link.from == "10.0.0.2" && sl.link.to == "10.2.0.1"));
  CHECK(s.suspects.empty());
}

TEST_CASE("trace_scheduler: traces of different links run at once on the worker pool", "[trace]") {
  struct Meeting : PathTracer {
    std::mutex mu;
    std::condition_variable cv;
    int in = 0, most = 0;
    TraceOutcome trace(const TraceTarget&, const TraceOptions&, const TracePacer& pace) override {
      TraceOutcome o;
      if (pace()) ++o.packets;
      std::unique_lock lock(mu);
      most = std::max(most, ++in);
      cv.notify_all();
      // Each trace waits for another to be in flight with it (a guard ends the wait should the
      // pool run one at a time: then `most` stays 1 and the test fails).
      cv.wait_for(lock, 30s, [this] { return most >= 2; });
      --in;
      return o;
    }
  } meeting;
  TraceScheduler s({.rate = 1000, .burst = 1000, .max_queued = 8, .workers = 4}, meeting);
  s.start();
  // One local port each: a port's own traces take turns (per_port 1).
  for (std::uint64_t link = 1; link <= 4; ++link) s.request(job(link, false, "mlx5_" + std::to_string(link) + "/1"));
  std::size_t done = 0;
  while (done < 4) {
    done += s.take_results().size();
    std::this_thread::yield();
  }
  s.stop();
  CHECK(meeting.most >= 2);
  CHECK(meeting.most <= 4);
}

TEST_CASE("trace_scheduler: a port with many links waiting leaves workers for the other ports", "[trace]") {
  // (per_port 2 here: the cap, not the default of one trace at a time, is under test)
  // Port A's traces hold their worker until port B's trace has run: with the whole pool on A
  // (its 6 links asked first), B would never run and A's traces would wait out their guard.
  struct Held : PathTracer {
    std::mutex mu;
    std::condition_variable cv;
    bool b_ran = false;
    int most_on_a = 0, on_a = 0;
    TraceOutcome trace(const TraceTarget& t, const TraceOptions&, const TracePacer& pace) override {
      TraceOutcome o;
      if (pace()) ++o.packets;
      std::unique_lock lock(mu);
      if (t.sport == 0xC000 + 100) {
        b_ran = true;
        cv.notify_all();
        return o;
      }
      most_on_a = std::max(most_on_a, ++on_a);
      if (!cv.wait_for(lock, 30s, [this] { return b_ran; })) o.failure = "stopped";
      --on_a;
      return o;
    }
  } held;
  TraceScheduler s({.rate = 1000, .burst = 1000, .max_queued = 16, .workers = 4, .per_port = 2}, held);
  s.start();
  for (std::uint64_t link = 1; link <= 6; ++link) s.request(job(link, false, "mlx5_0/1"));
  s.request(job(100, false, "mlx5_1/1"));
  std::size_t done = 0;
  while (done < 7) {
    done += s.take_results().size();
    std::this_thread::yield();
  }
  s.stop();
  CHECK(held.b_ran);
  CHECK(held.most_on_a <= 2);  // per_port
  CHECK_FALSE(s.counters().results.count("stopped"));
}

TEST_CASE("trace_scheduler: /prober/traces needs an authenticated caller, valid JSON rows", "[trace]") {
  FlowTrace t;
  t.flow.device = "mlx5_0";
  t.flow.port = 1;
  t.flow.peer = "node\x01\xff";
  t.flow_label = 0x4001;
  t.sport = 0xC000;
  t.dest_qpn = 17;
  t.path = {"10.1.0.1", "*", "10.2.0.1"};
  t.state = "clean";
  Snapshot snap;
  snap.windows = 7;
  snap.traces = {t};
  rdma::exporter::RequestIdentity anon, user;
  user.basic_auth_user = "ops";
  CHECK(traces_response(&snap, true, anon).status == 403);
  // The fabric rule: the 403 names the setting that lets anonymous callers in, and the setting does.
  CHECK(traces_response(&snap, true, anon).body.find("collectors.prober.traces_allow_unauthenticated: true") !=
        std::string::npos);
  CHECK(traces_response(&snap, true, anon, true).status == 200);
  auto ok = traces_response(&snap, true, user);
  CHECK(ok.status == 200);
  CHECK(ok.content_type == "application/json");
  CHECK(ok.body.find("\"path\":[\"10.1.0.1\",\"*\",\"10.2.0.1\"]") != std::string::npos);
  CHECK(ok.body.find("\"udp_sport\":49152") != std::string::npos);
  CHECK(ok.body.find("\"state\":\"clean\"") != std::string::npos);
  CHECK(ok.body.find("\"window\":7,") != std::string::npos);
  CHECK(ok.body.find("\\u0001") != std::string::npos);
  CHECK(ok.body.find("\"truncated\":false") != std::string::npos);
  Snapshot many;
  many.traces.assign(kMaxTraceRows + 3, t);
  auto big = traces_response(&many, true, user);
  CHECK(big.body.find("\"truncated\":true") != std::string::npos);
  CHECK(traces_response(nullptr, false, user).body == "{\"tracing\":false,\"flows\":[],\"truncated\":false}\n");
}

TEST_CASE("trace_scheduler: /prober/traces answers a query parameter as every extra path does", "[trace]") {
  Snapshot snap;
  rdma::exporter::RequestIdentity anon, user;
  user.basic_auth_user = "ops";
  CHECK(traces_response(&snap, true, user, false, "").status == 200);
  CHECK(traces_response(&snap, true, user, false, "&").status == 200);
  // The path takes no parameter: one a caller means as a filter is refused, not ignored.
  const auto bad = traces_response(&snap, true, user, false, "device=mlx5_0");
  CHECK(bad.status == 400);
  CHECK(bad.body == "unknown parameter `device` (this path takes none)\n");
  CHECK(traces_response(&snap, true, user, false, "%zz").status == 400);
  // The access rule first: an anonymous caller learns nothing about the query.
  CHECK(traces_response(&snap, true, anon, false, "device=mlx5_0").status == 403);
}

namespace {

// Flow 0 of the rig's link crosses spine a (10.9.1.1), flow 1 spine b (10.9.2.1); both then R
// (10.0.2.254) and the peer. With `spray`, flow 0's 5-tuple answers from spine a and spine c by
// turns, as a fabric that sprays its packets would.
// Flow 1 goes via spine 10.9.2.1, the others via 10.9.1.1. A fresh trace (a flow's second) of a
// losing flow: with `spray`, flow 0's answers from spine 10.9.3.1 at the same distance (another
// path for one 5-tuple) and flow 2's stops after the first router (narrowed to the link after it);
// without, no router answers it (their ICMP budget spent), so its whole known path stays in
// question. A fresh trace that passed would name nothing (suspect_links.h).
void two_paths(Rig& r, bool spray) {
  auto calls = std::make_shared<std::map<std::uint16_t, unsigned>>();
  r.tracer.script = [&r, spray, calls](const TraceTarget& t) {
    const unsigned flow = r.flow_of(t.dest_qpn - 0x100);
    const bool fresh = (*calls)[t.sport]++ > 0 && r.losing.count(flow);
    TraceOutcome o;
    o.hops = {"10.0.0.1", flow == 1 ? "10.9.2.1" : "10.9.1.1", "10.0.2.254", "10.2.0.1"};
    o.complete = true;
    if (fresh && !spray) {
      o.hops.clear();
      o.complete = false;
      o.failure = "no_answer";
    } else if (fresh && flow == 0) {
      o.hops[1] = "10.9.3.1";
    } else if (fresh) {
      o.hops = {"10.0.0.1", "*", "*"};
      o.complete = false;
    }
    o.packets = o.answers = o.hops.size();
    return o;
  };
}

bool crosses(const std::vector<std::string>& path, const rdma::model::HopLink& l) {
  for (std::size_t i = 0; i + 1 < path.size(); ++i)
    if (path[i] == l.from && path[i + 1] == l.to) return true;
  return false;
}

rdma::exporter::RequestIdentity ops() {
  rdma::exporter::RequestIdentity who;
  who.basic_auth_user = "ops";
  return who;
}

}  // namespace

TEST_CASE("trace_scheduler: one snapshot holds a window's verdicts, flow states and the suspects named from them",
          "[trace]") {
  auto c = trace_config();
  c.flow_rotation = 0ms;
  Rig r(c);
  two_paths(r, false);
  r.run(T0, T0 + 1s, true);
  r.drain();
  r.run(T0 + 1s, T0 + 2s, true);
  r.losing = {0};
  r.run(T0 + 2s, T0 + 10s + 200ms, true);
  auto s = r.engine.snapshot();
  REQUIRE(s.windows == 1);
  REQUIRE(s.findings.size() == 1);
  CHECK(s.findings[0].rail == "r1");
  CHECK(s.findings[0].path);
  std::map<std::string, std::string> state;
  for (const auto& f : s.traces) state[flow_id(f.flow)] = f.state;
  REQUIRE(state.size() == 2);
  std::string lossy_id;
  for (const auto& [id, st] : state)
    if (st == "lossy") lossy_id = id;
  CHECK(!lossy_id.empty());
  // Flow 0's fresh trace is still queued: nothing is named yet.
  CHECK(r.sched.counters().queued == 1);
  CHECK(s.evidence.empty());
  CHECK(s.suspects.empty());
  // Back (no router answered it: the whole path stays in question), flow 0's two links past the
  // first hop are tied: both named, each with its evidence, and neither crossed by a flow the
  // window judged clean.
  r.drain();
  r.run(T0 + 10s + 200ms, T0 + 11s, true);
  s = r.engine.snapshot();
  CHECK(s.windows == 1);
  REQUIRE(s.evidence.size() == 2);
  REQUIRE(s.suspects.size() == 2);
  for (const auto& e : s.evidence) {
    CHECK(e.link.group == "r1");
    CHECK(e.link.lossy_ids == std::vector<std::string>{lossy_id});
    CHECK(e.named_unix > 0);
    CHECK_FALSE(e.link.narrowed);
    for (const auto& f : s.traces)
      if (f.state == "clean") CHECK_FALSE(crosses(f.path, e.link.link));
  }
  CHECK(s.spray_evidence == 0);
  const double named = s.evidence[0].named_unix;
  const auto json = traces_response(&s, true, ops()).body;
  CHECK(json.find("\"window\":1,") != std::string::npos);
  CHECK(json.find("\"verdicts\":[{\"rail\":\"r1\",\"verdict\":\"path\"}]") != std::string::npos);
  CHECK(json.find("\"basis\":\"intersection\"") != std::string::npos);
  CHECK(json.find("\"state\":\"lossy\"") != std::string::npos);
  CHECK(json.find("\"flows\":[\"" + lossy_id + "\"]") != std::string::npos);
  // The next window names the same links: named since the same time.
  r.run(T0 + 11s, T0 + 20s + 200ms, true);
  s = r.engine.snapshot();
  CHECK(s.windows == 2);
  REQUIRE_FALSE(s.evidence.empty());
  CHECK(s.evidence[0].named_unix == named);
}

TEST_CASE("trace_scheduler: a 5-tuple traced on two paths marks its rail as spraying: suspects withheld, said so",
          "[trace]") {
  auto c = trace_config();
  c.flow_rotation = 0ms;
  c.flows = 3;
  Rig r(c);
  two_paths(r, true);
  r.run(T0, T0 + 1s, true);
  r.drain();
  r.run(T0 + 1s, T0 + 2s, true);
  r.losing = {0, 2};
  r.run(T0 + 2s, T0 + 10s + 200ms, true);
  // Flow 0's fresh trace answers from spine 10.9.3.1 where its first answered from 10.9.1.1; flow
  // 2's stops after the first router, which alone would name the link after it.
  r.drain();
  r.run(T0 + 10s + 200ms, T0 + 11s, true);
  auto s = r.engine.snapshot();
  CHECK(s.spray_evidence == 1);
  REQUIRE(s.findings.size() == 1);
  CHECK(s.findings[0].path);  // the verdict stands: the rail has a lossy path
  CHECK(s.spraying == std::set<std::string>{"r1"});
  CHECK(s.evidence.empty());  // but no single link is named
  CHECK(s.suspects.empty());
  CHECK(s.withheld.at("r1") >= 1);
  rdma::exporter::MetricSink out;
  write_suspect_evidence(s, out);
  CHECK(rdma::testing::dbl(out, "rdma_prober_rail_spraying", {{"rail", "r1"}}) == 1.0);
  CHECK(rdma::testing::u64(out, "rdma_prober_suspects_withheld", {{"rail", "r1"}}) >= 1u);
  CHECK(rdma::testing::u64(out, "rdma_prober_trace_disagreements_total", {}) == 1u);
  CHECK(traces_response(&s, true, ops()).body.find("\"spraying\":[\"r1\"]") != std::string::npos);
  // Without spraying the same fault names links (the test above): the withholding is the rail's.
}
