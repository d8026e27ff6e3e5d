// The discovery's walk of a device kept across scrapes: reused while the device's directories
// keep their identity, walked again when the device is registered anew or its ports change; the
// netdevs are resolved at every scrape.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "sources/model/host_model.h"
#include "tests/lib/temp_tree.h"

using rdma::model::Discoverer;
using rdma::model::DiscoveryOptions;
using rdma::model::LinkLayer;
using rdma::testing::TempTree;

namespace {
void age(const std::string& dir) { REQUIRE(rdma::testing::age_dir(dir)); }

void write_device(const TempTree& t, const std::string& dev, const std::string& link_layer) {
  t.write("class/infiniband/" + dev + "/ports/1/link_layer", link_layer + "\n");
  t.write("class/infiniband/" + dev + "/device/net/ib0/dev_id", "0x0\n");
  for (const char* d : {"", "/ports", "/ports/1"}) age(t.root() + "/class/infiniband/" + dev + d);
}
// mlx5_0, InfiniBand, with its device/net still, and a discoverer that trusts directories at
// once (racy 0: the tests set their times themselves).
struct StillDevice {
  TempTree t{"discovery"};
  std::string net = t.root() + "/class/infiniband/mlx5_0/device/net";
  Discoverer d{DiscoveryOptions{t.root(), "", "", 0}};
  StillDevice() {
    write_device(t, "mlx5_0", "InfiniBand");
    age(net);
  }
};
}  // namespace

TEST_CASE("Discovery reuses a still device's walk, and walks a device registered anew or a port added") {
  TempTree t("discovery");
  write_device(t, "mlx5_0", "InfiniBand");
  // Directories are trusted at once here (racy 0): the test sets their times itself.
  const Discoverer d(DiscoveryOptions{t.root(), "", "", 0});
  auto h = d.discover();
  REQUIRE(h->devices.size() == 1);
  REQUIRE(h->devices[0].ports.size() == 1);
  CHECK(h->devices[0].ports[0].link_layer == LinkLayer::kInfiniBand);

  // The kernel never changes a live port's link layer; rewriting the file in place changes no
  // directory, so the walk is reused and this is not read again.
  t.write("class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet\n");
  CHECK(d.discover()->devices[0].ports[0].link_layer == LinkLayer::kInfiniBand);

  // Registered again (a new directory under the same name): walked again.
  const std::string dev = t.root() + "/class/infiniband/mlx5_0";
  REQUIRE(std::rename(dev.c_str(), (t.root() + "/mlx5_0.old").c_str()) == 0);
  write_device(t, "mlx5_0", "Ethernet");
  h = d.discover();
  REQUIRE(h->devices.size() == 1);
  CHECK(h->devices[0].ports[0].link_layer == LinkLayer::kEthernet);

  // A port added changes ports/.
  t.write("class/infiniband/mlx5_0/ports/2/link_layer", "InfiniBand\n");
  h = d.discover();
  REQUIRE(h->devices[0].ports.size() == 2);
  CHECK(h->devices[0].ports[1].number == 2);
  CHECK(h->devices[0].ports[1].link_layer == LinkLayer::kInfiniBand);

  // A device gone is gone.
  std::filesystem::remove_all(dev);
  CHECK(d.discover()->devices.empty());
}

TEST_CASE("Discovery resolves the netdevs at every scrape, also of a device whose walk it reuses") {
  TempTree t("discovery");
  write_device(t, "mlx5_0", "InfiniBand");
  const Discoverer d(DiscoveryOptions{t.root(), "", "", 0});
  auto h = d.discover();
  REQUIRE(h->devices[0].ports[0].netdevs.size() == 1);
  CHECK(h->devices[0].ports[0].netdevs[0].name == "ib0");
  const std::string net = t.root() + "/class/infiniband/mlx5_0/device/net";
  REQUIRE(std::rename((net + "/ib0").c_str(), (net + "/ibp1s0").c_str()) == 0);
  h = d.discover();
  REQUIRE(h->devices[0].ports[0].netdevs.size() == 1);
  CHECK(h->devices[0].ports[0].netdevs[0].name == "ibp1s0");
}

TEST_CASE("Discovery walks again a device whose last walk met a problem, and reports it each time") {
  TempTree t("discovery");
  write_device(t, "mlx5_0", "InfiniBand");
  std::filesystem::remove(t.root() + "/class/infiniband/mlx5_0/ports/1/link_layer");
  age(t.root() + "/class/infiniband/mlx5_0/ports/1");
  const Discoverer d(DiscoveryOptions{t.root(), "", "", 0});
  CHECK(d.discover()->issues.size() == 1);
  CHECK(d.discover()->issues.size() == 1);
  // Written in place later (no directory of the walk changes but ports/1, aged again): seen.
  t.write("class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet\n");
  age(t.root() + "/class/infiniband/mlx5_0/ports/1");
  auto h = d.discover();
  CHECK(h->issues.empty());
  CHECK(h->devices[0].ports[0].link_layer == LinkLayer::kEthernet);
}

// device/net's listing is kept with the walk and checked at each scrape (its identity, each
// entry's inode): a netdev renamed, added or removed under a reused walk is seen at the next scrape.
TEST_CASE("Discovery sees a netdev renamed, added or removed under a reused walk") {
  const StillDevice s;
  const TempTree& t = s.t;
  const std::string& net = s.net;
  const Discoverer& d = s.d;
  REQUIRE(d.discover()->devices[0].ports[0].netdevs.size() == 1);
  CHECK(d.discover()->devices[0].ports[0].netdevs[0].name == "ib0");  // the kept listing

  REQUIRE(std::rename((net + "/ib0").c_str(), (net + "/ibp1s0").c_str()) == 0);
  age(net);
  auto h = d.discover();
  REQUIRE(h->devices[0].ports[0].netdevs.size() == 1);
  CHECK(h->devices[0].ports[0].netdevs[0].name == "ibp1s0");

  // A second netdev (an IPoIB child): dev_port now decides, and port 1 is dev_port 0.
  t.write("class/infiniband/mlx5_0/device/net/ibp1s0/dev_port", "0\n");
  t.write("class/infiniband/mlx5_0/device/net/ibp1s0.8001/dev_port", "1\n");
  age(net);
  h = d.discover();
  REQUIRE(h->devices[0].ports[0].netdevs.size() == 1);
  CHECK(h->devices[0].ports[0].netdevs[0].name == "ibp1s0");
  t.write("class/infiniband/mlx5_0/device/net/ibp1s0.8001/dev_port", "0\n");
  std::filesystem::remove_all(net + "/ibp1s0");
  age(net);
  h = d.discover();
  REQUIRE(h->devices[0].ports[0].netdevs.size() == 1);
  CHECK(h->devices[0].ports[0].netdevs[0].name == "ibp1s0.8001");
}

// Only the device is looked up by name at each scrape; ports/ and each port are checked through
// the descriptors the walk kept open: a port directory replaced is seen through ports/, and an
// entry added in a port through the port's own descriptor.
TEST_CASE("Discovery walks again a device whose port directory was replaced or changed under a kept walk") {
  TempTree t("discovery");
  write_device(t, "mlx5_0", "InfiniBand");
  const std::string ports = t.root() + "/class/infiniband/mlx5_0/ports";
  const Discoverer d(DiscoveryOptions{t.root(), "", "", 0});
  auto h = d.discover();
  REQUIRE(h->devices.size() == 1);
  REQUIRE(h->devices[0].ports[0].identity);
  const auto first = *h->devices[0].ports[0].identity;

  // Replaced by rename: ports/ changes.
  t.write("class/infiniband/mlx5_0/ports/new/link_layer", "Ethernet\n");
  std::filesystem::remove_all(ports + "/1");
  std::filesystem::rename(ports + "/new", ports + "/1");
  age(ports);
  h = d.discover();
  REQUIRE(h->devices[0].ports.size() == 1);
  CHECK(h->devices[0].ports[0].link_layer == LinkLayer::kEthernet);
  REQUIRE(h->devices[0].ports[0].identity);
  const auto replaced = *h->devices[0].ports[0].identity;
  CHECK_FALSE(replaced == first);
  CHECK(*d.discover()->devices[0].ports[0].identity == replaced);  // still: the kept walk

  // An entry added in the port (ports/ unchanged): the port's identity moves, the walk is taken
  // again (the link layer, rewritten in place, is read again with it).
  t.write("class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  t.write("class/infiniband/mlx5_0/ports/1/counters/symbol_error", "0\n");
  h = d.discover();
  REQUIRE(h->devices[0].ports[0].identity);
  CHECK_FALSE(*h->devices[0].ports[0].identity == replaced);
  CHECK(h->devices[0].ports[0].link_layer == LinkLayer::kInfiniBand);
}

TEST_CASE("Discovery returns the last model again while nothing of it changed, and a new one when it did") {
  const StillDevice s;
  const TempTree& t = s.t;
  const std::string& net = s.net;
  const Discoverer& d = s.d;
  const auto first = d.discover();
  CHECK(d.discover() == first);

  REQUIRE(std::rename((net + "/ib0").c_str(), (net + "/ibp1s0").c_str()) == 0);
  age(net);
  const auto renamed = d.discover();
  CHECK(renamed != first);
  REQUIRE(renamed->devices[0].ports[0].netdevs.size() == 1);
  CHECK(renamed->devices[0].ports[0].netdevs[0].name == "ibp1s0");
  CHECK(d.discover() == renamed);

  // A device added: a new model with both.
  write_device(t, "mlx5_1", "InfiniBand");
  const auto two = d.discover();
  CHECK(two != renamed);
  CHECK(two->devices.size() == 2);

  // A RoCE port's netdevs are read at every scrape (its GID bindings can change under it): never
  // the last model again.
  write_device(t, "mlx5_2", "Ethernet");
  const auto roce = d.discover();
  CHECK(roce->devices.size() == 3);
  CHECK(d.discover() != roce);
}
