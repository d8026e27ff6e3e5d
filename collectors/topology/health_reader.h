// What the topology collector reads again and again, between topology changes: the PCIe link and
// AER files of every function on the RDMA devices' paths, the ports and netdevs the expect:
// section compares, the peer-memory state. Run by the collector's background refresher (and by
// the scrape that meets a new device set); each reading is rendered to exposition text once, and
// scrapes copy that text (docs/metrics.md, collector topology, "Caching").
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectors/topology/expect.h"
#include "collectors/topology/topology_model.h"
#include "exporter/metrics.h"
#include "sources/model/host_model.h"
#include "sources/pci/tree.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::topology {

using Issues = std::vector<std::pair<std::string, ReadError>>;

// Not thread-safe: one reader per collector, used by whoever holds the collector's refresh lock.
class HealthReader {
 public:
  HealthReader(Expect expect, std::string procfs_root) : expect_(std::move(expect)), procfs_root_(std::move(procfs_root)) {}

  // A new topology (or device set): the functions to read are listed again, each distinct PCI
  // function once however many paths it is on (a dual-port NIC's two devices, NICs behind one
  // switch share the bridges above), parents before children. The kept directories stay open.
  void reset(std::shared_ptr<const Topology> topo, std::shared_ptr<const model::HostModel> host);
  // One reading of everything, as exposition text: the link and AER series per hop, the path
  // bandwidth, peer memory and the expect: checks. Problems go to issues as (file, error); a
  // function or port gone since the topology was walked has no files: no series, no issue.
  std::string read(Issues& issues);

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // A distinct PCI function on the paths.
  struct Function {
    std::string dir;
    std::size_t parent = kNone;  // index in functions_ of the bridge above; kNone for a root port
    bool aer_types = false;      // the function of an RDMA device: its per-type AER counters too
    sysfs::KeptDirs::Ref ref;
    // max_link_speed/width, read at the first reading of a topology (fixed capabilities).
    bool have_maxima = false;
    std::optional<std::uint32_t> max_speed, max_width;
  };
  struct AerType {
    std::string name;
    exporter::LabelSet labels;  // device, pci_function, hop, aer_severity, type
  };
  // An RDMA device's path: which function each hop is, and the label sets its series carry.
  struct NicPath {
    std::vector<std::size_t> functions;   // by hop: hop 0 = the device's function, last = the root port
    std::vector<exporter::LabelSet> hop_labels;  // device, pci_function, hop
    exporter::LabelSet device_labels;
    std::array<std::vector<AerType>, 3> aer_types;  // of hop 0, by severity, as last read
  };

  // Writes a path's series from this reading; returns the device function's own health (hop 0).
  const pci::Health* emit_path(NicPath& p, exporter::MetricSink& out);
  void emit_checks(const std::vector<const pci::Health*>& nic_health, const PeerMemory& pm, exporter::MetricSink& out);

  Expect expect_;
  std::string procfs_root_;
  std::shared_ptr<const Topology> topo_;
  std::shared_ptr<const model::HostModel> host_;
  std::vector<Function> functions_;
  std::vector<NicPath> paths_;  // by NIC, as topo_->nics
  std::vector<pci::Health> health_;  // by function, this reading's
  sysfs::KeptDirs kept_;
};

}  // namespace rdma::collectors::topology
