#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "collectors/pma/target_guard.h"

using namespace rdma::collectors::pma;
using namespace std::chrono_literals;

TEST_CASE("target reads: concurrent requests share one read, a fresh answer is served again") {
  TargetReads reads(1h, 16);
  std::atomic<int> calls{0}, shared_count{0};
  auto slow_read = [&] {
    ++calls;
    std::this_thread::sleep_for(50ms);  // long enough that the other requests find it running
    return TargetAnswer{200, "body", "ok", 7};
  };
  std::vector<std::thread> clients;
  std::atomic<std::uint64_t> mads{0};
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      bool shared = false;
      TargetAnswer a = reads.get("node/1", slow_read, &shared);
      CHECK(a.body == "body");
      shared_count += shared;
      mads += a.mads;
    });
  for (auto& t : clients) t.join();
  CHECK(calls == 1);
  CHECK(shared_count == 7);
  CHECK(mads == 7);  // only the request that read counts its MADs
  bool shared = false;
  CHECK(reads.get("node/1", slow_read, &shared).mads == 0);
  CHECK(shared);
  CHECK(calls == 1);
}

TEST_CASE("target reads: a request waits for another's read only until its own deadline") {
  TargetReads reads(1h, 16);
  std::mutex mu;
  std::condition_variable cv;
  bool reading = false, release = false;
  auto held_read = [&] {  // a read that takes as long as the test says (a node that never answers)
    std::unique_lock lock(mu);
    reading = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return TargetAnswer{200, "late", "ok", 3};
  };
  std::thread first([&] {
    bool shared = false;
    CHECK(reads.get("node/1", held_read, &shared).body == "late");
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return reading; });
  }
  bool shared = false;
  TargetAnswer waited = reads.get("node/1", held_read, &shared, TargetReads::Clock::now() + 20ms);
  CHECK(waited.status == 503);
  CHECK(waited.result == "busy");
  CHECK(waited.mads == 0);
  CHECK(shared);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  first.join();
  // Once the read is done its answer serves the next request, deadline or not.
  CHECK(reads.get("node/1", held_read, &shared, TargetReads::Clock::now()).body == "late");
}

TEST_CASE("target reads: an answer older than the cache time is read again, and the cache is bounded") {
  std::atomic<int> calls{0};
  auto read = [&] { return TargetAnswer{200, std::to_string(++calls), "ok", 1}; };
  bool shared = false;
  TargetReads quick(1ms, 16);
  quick.get("a", read, &shared);
  std::this_thread::sleep_for(5ms);
  quick.get("a", read, &shared);
  CHECK_FALSE(shared);
  CHECK(calls == 2);
  TargetReads small(1h, 2);
  calls = 0;
  small.get("a", read, &shared);
  small.get("b", read, &shared);
  small.get("c", read, &shared);  // evicts the oldest, "a"
  small.get("c", read, &shared);
  CHECK(shared);
  small.get("a", read, &shared);
  CHECK_FALSE(shared);
  CHECK(calls == 4);
}

TEST_CASE("MAD bucket: a burst is served at once, then reads wait for tokens or are refused past their deadline") {
  MadBucket bucket(100, 0);  // 100 MADs/s, a burst of 100
  const auto now = MadBucket::Clock::now();
  CHECK(bucket.take(100, now));
  CHECK_FALSE(bucket.take(50, MadBucket::Clock::now()));  // none left, no time to wait
  CHECK(bucket.take(5, MadBucket::Clock::now() + 1s));    // waits for 5 tokens (about 50 ms)
  bucket.debit(1000);                                     // retries sent beyond what was taken
  CHECK_FALSE(bucket.take(1, MadBucket::Clock::now() + 1s));  // 10 s of debt: refused, nothing taken
}

TEST_CASE("route gate: one computation at a time, a request rate, neither waits") {
  RouteGate gate(1);  // 1 request a second, a burst of 1
  {
    RouteGate::Admission first = gate.admit();
    REQUIRE(first.refused.empty());
    REQUIRE(first.held.owns_lock());
    // While the first computes, another thread is refused at once (busy), not queued behind it.
    std::string second;
    std::thread([&] { second = gate.admit().refused; }).join();
    CHECK(second == "busy");
  }
  // The slot is free again, but the second's token is spent: refused, holding nothing.
  const RouteGate::Admission over = gate.admit();
  CHECK(over.refused == "rate_limited");
  CHECK_FALSE(over.held.owns_lock());
  CHECK(gate.retry_after_s() == 1);
  CHECK(RouteGate(0.25).retry_after_s() == 4);
  std::this_thread::sleep_for(1100ms);  // one second refills one token
  CHECK(gate.admit().refused.empty());
}
