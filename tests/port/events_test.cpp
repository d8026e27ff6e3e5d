// The daemon's verbs async event bookkeeping (sources/verbs/device_events.h) on fixed clocks, the
// port collector's series of it, and the owner's thread on this host (no RDMA device needed: it
// starts, lists none, stops).
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>

#include <thread>

#include "collectors/port/port_events.h"
#include "sources/verbs/device_events.h"
#include "tests/lib/samples.h"

using namespace rdma;
using rdma::testing::find;
using Clock = verbs::PortEventBook::Clock;

TEST_CASE("async event kinds: the counted ibv_event_type values and their labels", "[unit]") {
  CHECK(verbs::classify_async_event(IBV_EVENT_PORT_ERR) == verbs::AsyncEvent::kPortErr);
  CHECK(verbs::classify_async_event(IBV_EVENT_CLIENT_REREGISTER) == verbs::AsyncEvent::kClientReregister);
  CHECK(verbs::classify_async_event(IBV_EVENT_DEVICE_FATAL) == verbs::AsyncEvent::kDeviceFatal);
  CHECK_FALSE(verbs::classify_async_event(IBV_EVENT_QP_FATAL));
  CHECK(verbs::async_event_label(verbs::AsyncEvent::kGidChange) == "gid_change");
  CHECK(verbs::async_event_label(verbs::AsyncEvent::kPkeyChange) == "pkey_change");
}

TEST_CASE("port event book: events counted, state changes timed, time not ACTIVE", "[unit]") {
  verbs::PortEventBook book;
  const auto t0 = Clock::now();
  const auto wall = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  book.seen("rxe0", 1, true, t0);
  book.event("rxe0", 1, verbs::AsyncEvent::kPortErr);
  CHECK(book.state("rxe0", 1, false, t0 + std::chrono::seconds(10), wall));
  CHECK_FALSE(book.state("rxe0", 1, false, t0 + std::chrono::seconds(11), wall));  // no change
  book.event("rxe0", 1, verbs::AsyncEvent::kPortActive);
  CHECK(book.state("rxe0", 1, true, t0 + std::chrono::seconds(40), wall + std::chrono::seconds(30)));
  book.event("rxe0", 9, verbs::AsyncEvent::kPortErr);   // a port the device does not have: dropped
  book.event("rxe0", 0, verbs::AsyncEvent::kDeviceFatal);
  book.event("rxe0", 1, verbs::AsyncEvent::kGidChange);

  auto snap = book.snapshot(t0 + std::chrono::seconds(100));
  REQUIRE(snap.devices.count("rxe0"));
  const auto& d = snap.devices.at("rxe0");
  CHECK(d.device_fatal == 1);
  REQUIRE(d.ports.size() == 1);
  const auto& p = d.ports.at(1);
  CHECK(p.events[static_cast<std::size_t>(verbs::AsyncEvent::kPortErr)] == 1);
  CHECK(p.events[static_cast<std::size_t>(verbs::AsyncEvent::kPortActive)] == 1);
  CHECK(p.events[static_cast<std::size_t>(verbs::AsyncEvent::kGidChange)] == 1);
  CHECK(p.state_changes == 2);
  CHECK(p.active);
  CHECK(p.not_active_seconds == Approx(30.0));
  CHECK(p.last_change == wall + std::chrono::seconds(30));

  // Down again: the open stretch counts up to the snapshot.
  book.state("rxe0", 1, false, t0 + std::chrono::seconds(100), wall);
  CHECK(book.snapshot(t0 + std::chrono::seconds(105)).devices.at("rxe0").ports.at(1).not_active_seconds == Approx(35.0));
  // A port first seen down counts from then, without a change.
  book.seen("rxe1", 1, false, t0);
  const auto later = book.snapshot(t0 + std::chrono::seconds(5));  // q refers into it: keep it alive
  const auto& q = later.devices.at("rxe1").ports.at(1);
  CHECK(q.not_active_seconds == Approx(5.0));
  CHECK(q.state_changes == 0);
  CHECK_FALSE(q.last_change);
  book.forget("rxe1");
  CHECK_FALSE(book.knows("rxe1"));
}

TEST_CASE("port event series: every kind written with zeros, the timestamp once a change was seen", "[unit]") {
  verbs::PortEventState s;
  s.events[static_cast<std::size_t>(verbs::AsyncEvent::kPortErr)] = UINT64_MAX;
  s.state_changes = 4;
  s.not_active_seconds = 12.5;
  exporter::MetricSink out;
  const exporter::LabelSet base(exporter::Labels{{"device", "rxe0"}, {"port", "1"}});
  collectors::port::emit_port_events(base, s, out);
  CHECK(find(out, "rdma_port_async_events_total", {{"event", "port_err"}})->u64() == UINT64_MAX);
  CHECK(find(out, "rdma_port_async_events_total", {{"event", "pkey_change"}})->u64() == 0);
  CHECK(find(out, "rdma_port_state_changes_total", {{"device", "rxe0"}})->u64() == 4);
  CHECK(find(out, "rdma_port_not_active_seconds_total", {{"port", "1"}})->number() == 12.5);
  CHECK_FALSE(find(out, "rdma_port_state_change_timestamp_seconds"));
  s.last_change = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  exporter::MetricSink with_ts;
  collectors::port::emit_port_events(base, s, with_ts);
  CHECK(find(with_ts, "rdma_port_state_change_timestamp_seconds")->number() == 1700000000.0);
  CHECK(with_ts.sample_count() == verbs::kPortAsyncEvents + 3);
}

TEST_CASE("device event owner: starts, serves snapshots and subscriptions, stops", "[unit]") {
  verbs::DeviceEvents events(std::chrono::milliseconds(20));
  int calls = 0;
  {
    auto sub = events.subscribe([&](const verbs::DeviceEvents::PortChange&) { ++calls; });
    for (int i = 0; i < 500 && events.passes() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(events.passes() >= 3);  // rescans ran (every 20 ms)
  }
  auto snap = events.snapshot();
  CHECK(snap.running);
  CHECK_FALSE(events.context("rdma_no_such_device0"));
  CHECK_FALSE(snap.devices.count("rdma_no_such_device0"));
  CHECK(calls == 0);  // nothing changed on this host's devices (if any) in these milliseconds
}
