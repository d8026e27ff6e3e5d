// Collector "topology": where each RDMA device sits on the PCI tree and how healthy that path is.
//  - PCIe health per RDMA device: current and maximum link speed and width of its PCI function
//    and of every bridge up to the root port (hop 0 = the function, hop 1 its parent, ...),
//    whether each link trains below what both its ends support, which hop limits the path (the
//    bottleneck), and the AER counters (drivers/pci/pcie/aer.c) as exact counters.
//  - Topology against the accelerators found by PCI class: the relation of every NIC to every GPU
//    in nvidia-smi topo -m terms, the closest GPU per NIC and NIC per GPU, ACS on the bridges
//    between them (config space, read-only) and the host's peer-memory path.
//  - Conformance to the node shape declared in collectors.topology.expect: one
//    rdma_topology_check{check,subject,observed,expected} 1/0 per check.
// A scrape reads nothing: it copies two texts. The topology's series are rendered when the
// topology is walked: when the RDMA devices change (the scrape that sees it walks, so that no
// series of a gone device is served), when bus/pci/devices changes, and every `refresh` (ACS set
// by setpci). Link, AER, port and peer-memory facts change rarely and slowly (a retrained link,
// an AER report, a module loaded), and the alerts on them wait minutes (`for:`, increase over
// 10m): a background refresher reads them every `health-interval` and renders them, each distinct
// PCI function once; a scrape serves the last reading and its age.
// A host without GPUs, PCI bus or AER is state (no series, one log line), never an error.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "collectors/topology/expect.h"
#include "collectors/topology/health_reader.h"
#include "collectors/topology/topology_model.h"
#include "exporter/collector.h"
#include "exporter/exposition.h"
#include "exporter/thread.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::topology {
namespace {

using exporter::Labels;
using exporter::MetricSink;
using Clock = std::chrono::steady_clock;

std::string hex6(std::uint32_t v) { return fmt::format("0x{:06x}", v); }
std::string pci_id(const pci::Identity& id) { return fmt::format("{:04x}:{:04x}", id.vendor, id.device); }

std::optional<sysfs::DirIdentity> bus_identity(const std::string& sysfs_root) {
  auto id = sysfs::DirIdentity::of(sysfs_root + "/bus/pci/devices");
  return id ? std::optional(id.value) : std::nullopt;
}

// How this scrape's devices differ from those the topology was walked for: names, paths, drivers,
// ports, netdevs, and the directories' identities where both have one. Discovery gives a
// directory's identity only once it has been still for a while (sysfs::KeptDir::kRacySeconds):
// one arriving is no change (kSettled: kept for the next comparisons, no walk), a different one
// is a device registered again (a driver reload after a firmware update: fw_ver is walked).
enum class DeviceSet : std::uint8_t { kSame, kSettled, kChanged };
DeviceSet compare(const model::HostModel& walked, const model::HostModel& now) {
  if (walked.sysfs_root != now.sysfs_root || walked.devices.size() != now.devices.size()) return DeviceSet::kChanged;
  bool settled = false;
  auto same_id = [&](const std::optional<sysfs::DirIdentity>& a, const std::optional<sysfs::DirIdentity>& b) {
    if (a && b) return *a == *b;
    settled = settled || (!a && b);
    return true;
  };
  auto same_netdevs = [](const std::vector<model::NetdevRef>& a, const std::vector<model::NetdevRef>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const auto& x, const auto& y) { return x.name == y.name && x.via == y.via && x.bond == y.bond; });
  };
  for (std::size_t i = 0; i < now.devices.size(); ++i) {
    const auto &a = walked.devices[i], &b = now.devices[i];
    if (a.name != b.name || a.path != b.path || a.driver != b.driver || a.ports.size() != b.ports.size() ||
        !same_id(a.identity, b.identity))
      return DeviceSet::kChanged;
    for (std::size_t k = 0; k < b.ports.size(); ++k) {
      const auto &p = a.ports[k], &q = b.ports[k];
      if (p.path != q.path || p.number_label != q.number_label || p.link_layer != q.link_layer || !same_netdevs(p.netdevs, q.netdevs) ||
          !same_id(p.identity, q.identity))
        return DeviceSet::kChanged;
    }
  }
  return settled ? DeviceSet::kSettled : DeviceSet::kSame;
}

// What a scrape serves: the topology's text and the last reading's, published together.
struct Published {
  std::shared_ptr<const std::string> topology_text;
  std::shared_ptr<const std::string> health_text;
  Clock::time_point taken;  // when the reading began
  double seconds = 0;       // how long the refresh took (a walk included)
  std::uint64_t refreshes = 0;
};

class TopologyCollector final : public exporter::Collector {
 public:
  TopologyCollector(Expect expect, std::chrono::milliseconds walk_refresh, std::chrono::milliseconds health_interval,
                    std::string procfs_root)
      : walk_refresh_(walk_refresh), health_interval_(health_interval), reader_(std::move(expect), std::move(procfs_root)) {}
  ~TopologyCollector() override { stop(); }

  void start() override {
    std::lock_guard lock(run_mu_);
    if (thread_.joinable()) return;
    stop_.reset();
    thread_ = exporter::named_thread("topo-refresh", [this] { run(); });
  }

  void stop() override {
    stop_.stop();
    std::lock_guard lock(run_mu_);
    if (thread_.joinable()) thread_.join();
  }

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    // host_ is written only here (collect never runs concurrently with itself), under work_mu_
    // for the refresher, which reads it under work_mu_ only.
    if (const auto change = host_ ? compare(*host_, ctx.host) : DeviceSet::kChanged; change != DeviceSet::kSame) {
      auto host = std::make_shared<const model::HostModel>(ctx.host);
      std::lock_guard lock(work_mu_);
      host_ = std::move(host);
      if (change == DeviceSet::kChanged) {
        try {
          refresh(true);
        } catch (...) {
          host_.reset();  // the next scrape walks again
          throw;
        }
      }
    }
    std::shared_ptr<const Published> p;
    std::map<std::pair<std::string, ReadError>, std::uint64_t> issues;
    {
      std::lock_guard lock(pub_mu_);
      p = published_;
      issues.swap(pending_);
    }
    for (const auto& [issue, count] : issues)
      for (std::uint64_t i = 0; i < count; ++i) ctx.errors.report_read(issue.second, issue.first);
    if (!p) return;
    out.append_rendered(p->topology_text);
    out.append_rendered(p->health_text);
    out.gauge("rdma_topology_snapshot_age_seconds", "Seconds since the reading of the PCIe link and AER files, ports and peer memory served here began.", {},
              std::chrono::duration<double>(Clock::now() - p->taken).count());
    out.gauge("rdma_topology_refresh_interval_seconds",
              "The background refresher's wait between readings (health-interval): an age of several of these "
              "means it is stuck.", {},
              std::chrono::duration<double>(health_interval_).count());
    out.gauge("rdma_topology_refresh_duration_seconds", "How long the refresh that took the reading served here ran (a walk of the topology included).", {}, p->seconds);
    out.counter("rdma_topology_refreshes_total", "Readings of the PCIe link and AER files, ports and peer memory taken (the background refresher's and those of a scrape that met new RDMA devices).", {}, p->refreshes);
  }

 private:
  void run() {
    while (!stop_.wait_for(health_interval_)) {
      std::lock_guard lock(work_mu_);
      if (!host_) continue;  // no scrape yet: no device set to read for
      try {
        refresh(false);
      } catch (const std::exception& e) {
        spdlog::warn("topology: refresh failed: {}", e.what());
      }
    }
  }

  // Under work_mu_: walks the topology when asked to, when bus/pci/devices changed or when the walk
  // is `refresh` old, then reads and publishes.
  void refresh(bool walk) {
    const auto t0 = Clock::now();
    Issues issues;
    auto bus = bus_identity(host_->sysfs_root);
    if (walk || !topo_ || bus != bus_ || (walk_refresh_.count() > 0 && t0 - walked_at_ >= walk_refresh_)) {
      topo_ = build_topology(host_->sysfs_root, *host_);
      bus_ = std::move(bus);
      walked_at_ = t0;
      issues = topo_->issues;
      reader_.reset(topo_, host_);
      render_static();
      log_state();
    }
    auto text = std::make_shared<const std::string>(reader_.read(issues));
    auto p = std::make_shared<Published>();
    p->topology_text = static_text_;
    p->health_text = std::move(text);
    p->taken = t0;
    p->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    p->refreshes = ++refreshes_;
    std::lock_guard lock(pub_mu_);
    published_ = std::move(p);
    // Bounded: one entry per distinct file and error, the files of the topology's paths.
    for (auto& issue : issues) ++pending_[std::move(issue)];
  }

  // The series that change only with the topology, rendered once per build.
  void render_static() {
    MetricSink s;
    const auto& t = *topo_;
    for (const auto& nic : t.nics) {
      s.info("rdma_pci_function_info", "PCI function of an RDMA device: address, vendor:device, class, host bridge and NUMA node. Always 1.",
             {{"device", nic.device}, {"pci_function", nic.location.bdf()}, {"pci_id", pci_id(nic.identity)},
              {"class", hex6(nic.identity.class_code)}, {"host_bridge", nic.location.host_bridge},
              {"numa_node", std::to_string(nic.identity.numa_node)}});
    }
    for (const auto& nic : t.nics)
      s.gauge("rdma_pci_numa_node", "NUMA node of the RDMA device's PCI function (numa_node; -1: the platform gives none).", {{"device", nic.device}}, nic.identity.numa_node);
    for (const auto& nic : t.nics)
      s.gauge_u64("rdma_pci_path_hops", "PCI functions from the RDMA device's function up to its root port, both included.", {{"device", nic.device}}, nic.location.chain.size());
    s.gauge_u64("rdma_topology_gpus", "Accelerators found on the PCI bus by class (3D/VGA controllers of GPU vendors, processing accelerators).", {}, t.gpus.size());
    auto gpu_labels = [&](std::size_t j) {
      return Labels{{"gpu", std::to_string(j)}, {"gpu_pci", t.gpus[j].location.bdf()}};
    };
    for (std::size_t j = 0; j < t.gpus.size(); ++j) {
      Labels l = gpu_labels(j);
      const auto& id = t.gpus[j].identity;
      l.insert(l.end(), {{"pci_id", pci_id(id)}, {"class", hex6(id.class_code)}, {"host_bridge", t.gpus[j].location.host_bridge},
                         {"numa_node", std::to_string(id.numa_node)}});
      s.info("rdma_topology_gpu_info", "An accelerator on the PCI bus; gpu is its index in PCI address order (nvidia-smi's). Always 1.", l);
    }
    const char* rel_help = "How an RDMA device and a GPU are connected, as nvidia-smi topo -m names it (relation label); the value orders them: 1 PIX, 2 PXB, 3 PHB, 4 NODE, 5 SYS.";
    for (std::size_t i = 0; i < t.nics.size(); ++i)
      for (std::size_t j = 0; j < t.gpus.size(); ++j) {
        Labels l{{"device", t.nics[i].device}};
        for (auto& p : gpu_labels(j)) l.push_back(p);
        l.emplace_back("relation", std::string(pci::relation_name(t.relation[i][j])));
        s.gauge_u64("rdma_topology_relation", rel_help, l, static_cast<std::uint64_t>(t.relation[i][j]));
      }
    for (std::size_t i = 0; i < t.nics.size(); ++i)
      for (std::size_t j = 0; j < t.gpus.size(); ++j) {
        if (t.relation[i][j] != t.nic_closest[i]) continue;
        Labels l{{"device", t.nics[i].device}};
        for (auto& p : gpu_labels(j)) l.push_back(p);
        l.emplace_back("relation", std::string(pci::relation_name(t.relation[i][j])));
        s.gauge_u64("rdma_topology_nic_closest_gpu", "The GPUs closest to an RDMA device (all of them on a tie); value as rdma_topology_relation.", l, static_cast<std::uint64_t>(t.relation[i][j]));
      }
    for (std::size_t j = 0; j < t.gpus.size(); ++j)
      for (std::size_t i = 0; i < t.nics.size(); ++i) {
        if (t.relation[i][j] != t.gpu_closest[j]) continue;
        Labels l = gpu_labels(j);
        l.emplace_back("device", t.nics[i].device);
        l.emplace_back("relation", std::string(pci::relation_name(t.relation[i][j])));
        s.gauge_u64("rdma_topology_gpu_closest_nic", "The RDMA devices closest to a GPU (all of them on a tie); value as rdma_topology_relation.", l, static_cast<std::uint64_t>(t.relation[i][j]));
      }
    for (const auto& p : t.paths) {
      Labels base{{"device", t.nics[p.nic].device}};
      for (auto& kv : gpu_labels(p.gpu)) base.push_back(kv);
      std::uint64_t unreadable = 0;
      for (const auto& b : p.bridges) {
        if (b.acs.state == pci::Acs::State::kUnreadable) {
          ++unreadable;
          continue;
        }
        Labels l = base;
        l.emplace_back("pci_function", b.bdf);
        s.gauge_u64("rdma_topology_path_acs_redirect", "1 when ACS on this bridge between an RDMA device and its closest GPU redirects peer-to-peer traffic (ReqRedir, CmpltRedir or EgressCtrl set in the ACS control register).", l, b.acs.redirects_p2p() ? 1 : 0);
      }
      s.gauge_u64("rdma_topology_path_acs_unreadable", "Bridges between an RDMA device and its closest GPU whose config space could not be read past 64 bytes (the exporter is not root): their ACS state is unknown.", base, unreadable);
    }
    auto text = std::make_shared<std::string>();
    exporter::write_text(s, *text);
    static_text_ = std::move(text);
  }

  void log_state() {
    const auto& t = *topo_;
    if (!t.bus_present) spdlog::info("topology: no bus/pci/devices under the sysfs root: no accelerators, no GPU relations");
    else spdlog::info("topology: {} PCI functions, {} accelerators, {} RDMA devices on PCI", t.functions, t.gpus.size(), t.nics.size());
    for (const auto& d : t.not_pci)
      if (logged_not_pci_.insert(d).second) spdlog::info("topology: RDMA device {} has no PCI function (virtual): no PCIe series", d);
  }

  const std::chrono::milliseconds walk_refresh_, health_interval_;
  // The refresh's state: the scrape that meets a new device set and the refresher take work_mu_.
  std::mutex work_mu_;
  std::shared_ptr<const model::HostModel> host_;  // the device set of the last walk
  std::shared_ptr<const Topology> topo_;
  std::optional<sysfs::DirIdentity> bus_;
  Clock::time_point walked_at_{};
  std::shared_ptr<const std::string> static_text_;
  HealthReader reader_;
  std::uint64_t refreshes_ = 0;
  std::set<std::string> logged_not_pci_;
  // What scrapes take.
  std::mutex pub_mu_;
  std::shared_ptr<const Published> published_;
  std::map<std::pair<std::string, ReadError>, std::uint64_t> pending_;  // issues not yet reported
  // The refresher.
  std::mutex run_mu_;
  exporter::StopSignal stop_;
  std::thread thread_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "topology",
    .help = "PCIe path of each RDMA device (link speed/width per hop, bottleneck, AER), its relation to the GPUs (nvidia-smi topo terms), ACS, peer memory, and checks against collectors.topology.expect.",
    .enabled_by_default = true,
    .settings = {{"expect", exporter::OptionType::kYaml, "",
                  "YAML map of the node's declared shape (docs/metrics.md): devices, gpus, ports, mtu, pcie, gpu_nic_relation, acs_off, peer_memory, firmware."},
                 {"refresh", exporter::OptionType::kDuration, "5m",
                  "The PCI topology (GPUs, relations, ACS) is walked again at least this often, besides whenever bus/pci/devices or the RDMA devices change (0 = only then)."},
                 {"health-interval", exporter::OptionType::kDuration, "30s",
                  "How often the background refresher reads the PCIe link and AER files, the ports and netdevs expect: compares and the peer-memory state; scrapes serve the last reading (rdma_topology_snapshot_age_seconds)."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g) -> std::unique_ptr<exporter::Collector> {
      auto expect = parse_expect(s.yaml("expect"), s.origin("expect"));
      return std::make_unique<TopologyCollector>(std::move(expect), s.duration("refresh"), s.positive_duration("health-interval"),
                                                 g.procfs_root);
    },
});

}  // namespace rdma::collectors::topology
