// Helpers for the hw_counters tests: fake sysfs trees with exact values in a temp dir and a
// hand-built host model (sample lookup: tests/lib/samples.h).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "collectors/hw_counters/hw_counters_collector.h"
#include "exporter/error_reporter.h"
#include "exporter/metrics.h"
#include "sources/model/host_model.h"
#include "tests/lib/samples.h"
#include "tests/lib/temp_tree.h"

namespace hwtest {

namespace fs = std::filesystem;
using rdma::exporter::Labels;
using rdma::exporter::MetricSink;
using rdma::exporter::MetricType;

// A temporary tree with the class/infiniband layout (paths are absolute, under root()).
class TempTree : public rdma::testing::TempTree {
 public:
  TempTree() : rdma::testing::TempTree("hw_counters_test") {}
  explicit TempTree(const std::filesystem::path& parent) : rdma::testing::TempTree("hw_counters_test", parent) {}
  std::string dev_path(const std::string& dev) const { return root() + "/class/infiniband/" + dev; }
  std::string port_path(const std::string& dev, int port) const {
    return dev_path(dev) + "/ports/" + std::to_string(port);
  }
  // ports/<n>/hw_counters/<name> = "<value>\n"
  void port_counter(const std::string& dev, int port, const std::string& name, std::uint64_t v) const {
    write(port_path(dev, port) + "/hw_counters/" + name, std::to_string(v) + "\n");
  }
  void device_counter(const std::string& dev, const std::string& name, std::uint64_t v) const {
    write(dev_path(dev) + "/hw_counters/" + name, std::to_string(v) + "\n");
  }
  void port_dir(const std::string& dev, int port) const { fs::create_directories(port_path(dev, port)); }
};

// A host model of `devices` (name -> driver, ports 1..n) under the tree.
struct DevSpec {
  std::string name;
  std::string driver;
  int ports = 1;
};
inline rdma::model::HostModel model_of(const TempTree& t, const std::vector<DevSpec>& devs) {
  rdma::model::HostModel h;
  h.sysfs_root = t.root();
  for (const auto& d : devs) {
    rdma::model::DeviceModel dm;
    dm.name = d.name;
    dm.path = t.dev_path(d.name);
    dm.driver = d.driver;
    for (int p = 1; p <= d.ports; ++p) {
      rdma::model::PortModel pm;
      pm.number = static_cast<std::uint32_t>(p);
      pm.number_label = std::to_string(p);
      pm.path = t.port_path(d.name, p);
      dm.ports.push_back(pm);
    }
    h.devices.push_back(std::move(dm));
  }
  return h;
}

struct Scrape {
  MetricSink sink;
  std::map<std::string, std::uint64_t> errors;
};
inline Scrape collect(rdma::collectors::hw_counters::HwCountersCollector& c, const rdma::model::HostModel& h) {
  Scrape s;
  rdma::exporter::ErrorReporter errors("hw_counters");
  rdma::exporter::ScrapeContext ctx{h, errors};
  c.collect(ctx, s.sink);
  s.errors = errors.counts();
  return s;
}

using rdma::testing::count;
using rdma::testing::dbl;
using rdma::testing::exact;
using rdma::testing::family;
using rdma::testing::u64;

// `base` plus one more label (the counter of a raw series, the kind of a normalised one).
inline Labels with(Labels base, const std::string& name, const std::string& value) {
  base.emplace_back(name, value);
  return base;
}

inline rdma::collectors::hw_counters::Settings sysfs_only() {
  rdma::collectors::hw_counters::Settings st;
  st.netlink = rdma::collectors::hw_counters::NetlinkMode::kOff;
  return st;
}

}  // namespace hwtest
