// The responder's pending table policy (collectors/prober/wire/pending_admission.h): prefixes,
// the per-address bound, and that a full table gives up the busiest prefix's oldest connection,
// so that prefixes share it fairly and a real peer (one connection) stays in.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "collectors/prober/wire/handshake_io.h"
#include "collectors/prober/wire/pending_admission.h"

using namespace rdma::collectors::prober;

namespace {
Gid g(const std::string& numeric) {
  auto a = address_gid(numeric);
  REQUIRE(a);
  return *a;
}
}  // namespace

TEST_CASE("pending admission: a source prefix is the IPv4 /24 (mapped or not) or the IPv6 /64") {
  CHECK(gid_address(source_prefix(g("10.1.2.3"))) == "10.1.2.0");
  CHECK(source_prefix(g("10.1.2.3")) == source_prefix(g("10.1.2.250")));
  CHECK(source_prefix(g("10.1.2.3")) != source_prefix(g("10.1.3.3")));
  // An IPv4 peer of a dual-stack socket arrives as ::ffff:a.b.c.d: the same prefix as IPv4.
  CHECK(source_prefix(g("::ffff:10.1.2.3")) == source_prefix(g("10.1.2.99")));
  CHECK(gid_address(source_prefix(g("fd00:1:2:3:4:5:6:7"))) == "fd00:1:2:3::");
  CHECK(source_prefix(g("fd00:1:2:3::1")) == source_prefix(g("fd00:1:2:3:ffff:ffff:ffff:ffff")));
  CHECK(source_prefix(g("fd00:1:2:3::1")) != source_prefix(g("fd00:1:2:4::1")));
}

TEST_CASE("pending admission: an address at its bound replaces its own oldest connection") {
  PendingAdmission a({100, 3});
  std::vector<PendingAdmission::Id> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = a.admit(g("10.0.0.1"));
    CHECK(!r.evict);
    ids.push_back(r.id);
  }
  auto other = a.admit(g("10.0.0.2"));  // same /24, another address: its own bound
  CHECK(!other.evict);
  auto r = a.admit(g("10.0.0.1"));
  REQUIRE(r.evict);
  CHECK(*r.evict == ids[0]);
  CHECK(r.reason == "pending_per_source");
  CHECK(a.from_source(g("10.0.0.1")) == 3);
  CHECK(a.size() == 4);
  a.remove(ids[1]);
  a.remove(ids[1]);  // twice: ignored
  CHECK(a.from_source(g("10.0.0.1")) == 2);
  CHECK(!a.admit(g("10.0.0.1")).evict);
}

TEST_CASE("pending admission: a full table gives up the busiest prefix's oldest, never the newcomer") {
  PendingAdmission a({8, 8});
  std::map<PendingAdmission::Id, std::string> who;
  for (int i = 0; i < 6; ++i) who[a.admit(g("10.9.9." + std::to_string(i + 1))).id] = "flood";  // one /24, 6 addresses
  for (int i = 0; i < 2; ++i) who[a.admit(g("10.8.8.1")).id] = "other";
  REQUIRE(a.size() == 8);
  // A newcomer from a third prefix: the flood's prefix (6) is the busiest; its oldest goes.
  auto r = a.admit(g("192.168.1.1"));
  REQUIRE(r.evict);
  CHECK(r.reason == "pending_total");
  CHECK(who[*r.evict] == "flood");
  CHECK(*r.evict == who.begin()->first);
  who.erase(*r.evict);
  who[r.id] = "peer";
  // The flood goes on: it only ever replaces itself while it holds more than anyone else.
  for (int i = 0; i < 100; ++i) {
    auto f = a.admit(g("10.9.9." + std::to_string(i % 6 + 1)));
    REQUIRE(f.evict);
    CHECK(who[*f.evict] == "flood");
    who.erase(*f.evict);
    who[f.id] = "flood";
  }
  CHECK(a.from_prefix(g("10.9.9.0")) == 5);
  CHECK(a.from_prefix(g("10.8.8.0")) == 2);
  CHECK(a.from_prefix(g("192.168.1.0")) == 1);
  // The other prefix grows while it holds less than the flood, then replaces its own.
  for (int i = 0; i < 10; ++i) a.admit(g("10.8.8." + std::to_string(i + 2)));
  CHECK(a.from_prefix(g("10.8.8.0")) + a.from_prefix(g("10.9.9.0")) == 7);
  CHECK(a.from_prefix(g("10.8.8.0")) >= 3);
  CHECK(a.from_prefix(g("10.9.9.0")) >= 3);
  CHECK(a.from_prefix(g("192.168.1.0")) == 1);  // the peer was never the busiest
}

TEST_CASE("pending admission: many prefixes share the table evenly, and a single connection survives their churn") {
  // 64 prefixes of 2 fill 128; a 65th prefix's one connection stays while the others re-open.
  PendingAdmission a({128, 8});
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 64; ++i) CHECK(!a.admit(g("10." + std::to_string(i) + ".0.1")).evict);
  auto peer = a.admit(g("172.16.0.1"));
  REQUIRE(peer.evict);
  for (int i = 0; i < 64 * 50; ++i) {
    auto r = a.admit(g("10." + std::to_string(i % 64) + ".0." + std::to_string(i % 3 + 1)));
    REQUIRE(r.evict);
    CHECK(*r.evict != peer.id);
  }
  CHECK(a.from_source(g("172.16.0.1")) == 1);
  CHECK(a.size() == 128);
  for (int i = 0; i < 64; ++i) {
    CHECK(a.from_prefix(g("10." + std::to_string(i) + ".0.0")) >= 1);
    CHECK(a.from_prefix(g("10." + std::to_string(i) + ".0.0")) <= 3);
  }
}

TEST_CASE("pending admission: IPv6 addresses of one /64 are one prefix") {
  PendingAdmission a({16, 8});
  for (int i = 0; i < 16; ++i) a.admit(g("fd00:5a:1:2::" + std::to_string(i + 1)));
  // A second /64 gets its share although 16 addresses of the first hold the table.
  for (int i = 0; i < 8; ++i) {
    auto r = a.admit(g("fd00:5a:1:3::1"));
    REQUIRE(r.evict);
    CHECK(r.reason == "pending_total");
  }
  CHECK(a.from_prefix(g("fd00:5a:1:3::1")) == 8);
  CHECK(a.from_prefix(g("fd00:5a:1:2::1")) == 8);
}
