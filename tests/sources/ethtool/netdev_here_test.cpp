#include <catch2/catch.hpp>
#include <net/if.h>

#include <string>

#include "sources/ethtool/netdev_here.h"
#include "tests/lib/temp_tree.h"

using rdma::ethtool::netdev_here;
using State = rdma::ethtool::NetdevHere::State;

// Every network namespace has "lo"; its ifindex is read, not assumed. "rdmanone0" is a name no
// test host gives a netdev.
TEST_CASE("netdev_here: the tree's ifindex against this namespace's") {
  const unsigned lo = if_nametoindex("lo");
  REQUIRE(lo != 0);
  rdma::testing::TempTree t("netdev_here");
  t.write("same/class/net/lo/ifindex", std::to_string(lo) + "\n");
  t.write("other/class/net/lo/ifindex", std::to_string(lo + 1000) + "\n");
  t.write("other/class/net/rdmanone0/ifindex", "7\n");
  t.write("bare/class/net/lo/address", "00:00:00:00:00:00\n");

  auto same = netdev_here(t.root() + "/same", "lo");
  CHECK(same.state == State::kHere);
  CHECK(same.here());
  CHECK(same.ifindex == lo);
  // Another kernel's lo: the same name, another netdev.
  CHECK(netdev_here(t.root() + "/other", "lo").state == State::kElsewhere);
  CHECK_FALSE(netdev_here(t.root() + "/other", "lo").here());
  // Named with an ifindex by the tree, absent here.
  CHECK(netdev_here(t.root() + "/other", "rdmanone0").state == State::kElsewhere);
  // A tree without the ifindex is taken at its word.
  auto bare = netdev_here(t.root() + "/bare", "lo");
  CHECK(bare.state == State::kHere);
  CHECK(bare.ifindex == lo);
  auto missing = netdev_here(t.root() + "/bare", "rdmanone0");
  CHECK(missing.state == State::kMissing);
  CHECK(missing.ifindex == 0u);
}
