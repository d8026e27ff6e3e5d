// Collector "topology": where each RDMA device sits on the PCI tree and how healthy that path is.
//  - PCIe health per RDMA device, at every scrape: current and maximum link speed and width of its
//    PCI function and of every bridge up to the root port (hop 0 = the function, hop 1 its parent,
//    ...), whether each link trains below what both its ends support, which hop limits the path
//    (the bottleneck), and the AER counters (drivers/pci/pcie/aer.c) as exact counters.
//  - Topology against the accelerators found by PCI class: the relation of every NIC to every GPU
//    in nvidia-smi topo -m terms, the closest GPU per NIC and NIC per GPU, ACS on the bridges
//    between them (config space, read-only) and the host's peer-memory path. The topology is
//    walked when bus/pci/devices or the RDMA devices change (or every refresh interval, for ACS
//    set by setpci) and its series are rendered then: a scrape copies them.
//  - Conformance to the node shape declared in collectors.topology.expect: one
//    rdma_topology_check{check,subject,observed,expected} 1/0 per check.
// A host without GPUs, PCI bus or AER is state (no series, one log line), never an error.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <set>

#include "collectors/topology/expect.h"
#include "collectors/topology/topology_model.h"
#include "exporter/collector.h"
#include "exporter/exposition.h"
#include "sources/pci/parse.h"
#include "sources/sysfs/parse.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::topology {
namespace {

using exporter::Labels;
using exporter::LabelSet;
using exporter::MetricSink;
using pci::Relation;

constexpr const char* kSeverity[] = {"correctable", "nonfatal", "fatal"};

std::string speed_text(std::uint32_t tenths) { return fmt::format("{}.{} GT/s", tenths / 10, tenths % 10); }
std::string hex6(std::uint32_t v) { return fmt::format("0x{:06x}", v); }
std::string pci_id(const pci::Identity& id) { return fmt::format("{:04x}:{:04x}", id.vendor, id.device); }

// What the cache of a topology depends on: bus/pci/devices (a function hot-plugged or removed) and
// the RDMA devices (a new registration is a new directory identity).
struct Key {
  std::optional<sysfs::DirIdentity> bus;
  std::vector<std::tuple<std::string, std::string, std::optional<sysfs::DirIdentity>>> devices;
  bool operator==(const Key&) const = default;
};

// One function on an RDMA device's path, with the label sets its series are written against.
struct Hop {
  std::string dir;
  std::string bdf;
  LabelSet labels;  // device, pci_function, hop
  sysfs::KeptDirs::Ref ref;
  // max_link_speed/width, read at the first scrape of a topology (fixed capabilities).
  bool have_maxima = false;
  std::optional<std::uint32_t> max_speed, max_width;
};
struct AerType {
  std::string name;
  LabelSet labels;  // device, pci_function, hop, aer_severity, type
};
struct NicState {
  std::vector<Hop> hops;  // hop 0 = the device's function, last = the root port
  std::array<std::vector<AerType>, 3> aer_types;  // of hop 0, by severity, as last read
  LabelSet device_labels;
};

class TopologyCollector final : public exporter::Collector {
 public:
  TopologyCollector(Expect expect, std::chrono::milliseconds refresh, std::string procfs_root)
      : expect_(std::move(expect)), refresh_(refresh), procfs_root_(std::move(procfs_root)) {}

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    const auto& root = ctx.host.sysfs_root;
    Key key = key_of(ctx.host);
    const auto now = std::chrono::steady_clock::now();
    if (!topo_ || !(key == key_) || (refresh_.count() > 0 && now - built_at_ >= refresh_)) {
      topo_ = build_topology(root, ctx.host);
      key_ = std::move(key);
      built_at_ = now;
      for (const auto& [path, err] : topo_->issues) ctx.errors.report_read(err, path);
      rebuild_state();
      render_static();
      log_state();
    }
    std::vector<std::pair<std::string, ReadError>> issues;
    std::vector<pci::Health> nic_health;
    nic_health.reserve(topo_->nics.size());
    for (std::size_t i = 0; i < topo_->nics.size(); ++i) nic_health.push_back(collect_nic(state_[i], issues, out));
    for (const auto& [path, err] : issues) ctx.errors.report_read(err, path);
    const auto pm = read_peer_memory(root, procfs_root_);
    emit_peer_memory(pm, out);
    if (expect_.present) emit_checks(ctx, nic_health, pm, out);
    kept_.sweep();
    out.append_rendered(static_text_);
  }

 private:
  static Key key_of(const model::HostModel& host) {
    Key k;
    if (auto id = sysfs::DirIdentity::of(host.sysfs_root + "/bus/pci/devices")) k.bus = id.value;
    for (const auto& d : host.devices) k.devices.emplace_back(d.name, d.path, d.identity);
    return k;
  }

  void rebuild_state() {
    state_.clear();
    for (const auto& nic : topo_->nics) {
      NicState st;
      st.device_labels = LabelSet(Labels{{"device", nic.device}});
      const auto& chain = nic.location.chain;
      for (std::size_t h = 0; h < chain.size(); ++h) {
        const std::size_t idx = chain.size() - 1 - h;
        Hop hop{nic.location.dir_of(idx), chain[idx], LabelSet(Labels{{"device", nic.device}, {"pci_function", chain[idx]}, {"hop", std::to_string(h)}}), {}};
        st.hops.push_back(std::move(hop));
      }
      state_.push_back(std::move(st));
    }
  }

  // Reads a NIC's hops (root port first, so that each child is looked up from its parent) and
  // writes their series. Returns the function's own health (hop 0) for the checks.
  pci::Health collect_nic(NicState& st, std::vector<std::pair<std::string, ReadError>>& issues, MetricSink& out) {
    std::vector<pci::Health> health(st.hops.size());
    const sysfs::KeptDir* parent = nullptr;
    for (std::size_t h = st.hops.size(); h-- > 0;) {
      auto& dir = kept_.at(st.hops[h].ref, st.hops[h].dir, parent);
      auto& hop = st.hops[h];
      health[h] = pci::read_health(dir, h == 0, !hop.have_maxima, issues);
      if (!hop.have_maxima) {
        hop.have_maxima = true;
        hop.max_speed = health[h].link.max_speed;
        hop.max_width = health[h].link.max_width;
      }
      health[h].link.max_speed = hop.max_speed;
      health[h].link.max_width = hop.max_width;
      parent = &dir;
    }
    // Links: a PCIe path alternates upstream-facing (endpoint, switch upstream port) and
    // downstream-facing ports (switch downstream port, root port) from the function up, so hops
    // (0,1), (2,3), ... are the two ends of one physical link. A link is degraded when it trains
    // below what both ends support; the bottleneck is the link with the lowest bandwidth (the
    // nearest to the function among equals), named by its downstream-facing port (the slot).
    const std::size_t n = st.hops.size();
    std::vector<int> degraded(n, -1);  // -1: no link files
    std::size_t bottleneck = n;
    double lowest = 0;
    for (std::size_t lo = 0; lo < n; lo += 2) {
      const std::size_t hi = lo + 1 < n ? lo + 1 : lo;
      auto min_of = [&](auto field) {
        std::optional<std::uint32_t> v;
        for (std::size_t k : {lo, hi})
          if (auto x = health[k].link.*field) v = v ? std::min(*v, *x) : *x;
        return v;
      };
      const auto cur_s = min_of(&pci::Link::current_speed), max_s = min_of(&pci::Link::max_speed);
      const auto cur_w = min_of(&pci::Link::current_width), max_w = min_of(&pci::Link::max_width);
      if (!health[lo].link.present() && !health[hi].link.present()) continue;
      const bool bad = (cur_s && max_s && *cur_s < *max_s) || (cur_w && max_w && *cur_w < *max_w) ||
                       (max_w && cur_w && *cur_w == 0);
      for (std::size_t k : {lo, hi})
        if (health[k].link.present()) degraded[k] = bad ? 1 : 0;
      if (cur_s && cur_w) {
        const double bw = pci::lane_bytes_per_second(*cur_s) * *cur_w;
        if (bottleneck == n || bw < lowest) {
          bottleneck = hi;
          lowest = bw;
        }
      }
    }
    for (std::size_t h = 0; h < n; ++h) {
      const auto& l = health[h].link;
      const auto& ls = st.hops[h].labels;
      if (l.current_speed)
        out.gauge(ls, "rdma_pci_link_current_speed_transfers_per_second", "Current PCIe link speed of the function at this hop (current_link_speed), in transfers per second per lane.", double(*l.current_speed) * 1e8);
      if (l.max_speed)
        out.gauge(ls, "rdma_pci_link_max_speed_transfers_per_second", "Maximum PCIe link speed the function at this hop supports (max_link_speed), in transfers per second per lane.", double(*l.max_speed) * 1e8);
      if (l.current_width)
        out.gauge_u64(ls, "rdma_pci_link_current_width_lanes", "Current PCIe link width of the function at this hop (current_link_width).", *l.current_width);
      if (l.max_width)
        out.gauge_u64(ls, "rdma_pci_link_max_width_lanes", "Maximum PCIe link width of the function at this hop (max_link_width).", *l.max_width);
      if (degraded[h] >= 0)
        out.gauge_u64(ls, "rdma_pci_link_degraded", "1 when the link at this hop trains below the speed or width both its ends support.", std::uint64_t(degraded[h]));
      if (bottleneck < n)
        out.gauge_u64(ls, "rdma_pci_link_bottleneck", "1 on the hop whose link has the lowest bandwidth on the path from the RDMA device to its root port (named by the port above the link).", h == bottleneck ? 1 : 0);
      for (std::size_t s = 0; s < 3; ++s)
        if (const auto& aer = health[h].aer[s]; aer && aer->total)
          out.add(ls, "rdma_pci_aer_reports_total", exporter::MetricType::kCounter, "AER error reports of the function at this hop (TOTAL_ERR_* of aer_dev_*), by aer_severity.", *aer->total, "aer_severity", kSeverity[s]);
    }
    if (bottleneck < n)
      out.gauge(st.device_labels, "rdma_pci_path_bandwidth_bytes_per_second", "Bandwidth of the bottleneck link between the RDMA device and its root port after line encoding, in bytes per second.", lowest);
    // Per error type: the device's own function only (the bridges' totals are above).
    for (std::size_t s = 0; s < 3 && n > 0; ++s) {
      const auto& aer = health[0].aer[s];
      if (!aer) continue;
      auto& types = st.aer_types[s];
      bool same = types.size() == aer->types.size();
      for (std::size_t k = 0; same && k < types.size(); ++k) same = types[k].name == aer->types[k].name;
      if (!same) {
        types.clear();
        for (const auto& t : aer->types) {
          Labels l = st.hops[0].labels.labels();
          l.emplace_back("aer_severity", kSeverity[s]);
          l.emplace_back("type", t.name);
          types.push_back({t.name, LabelSet(std::move(l))});
        }
      }
      for (std::size_t k = 0; k < types.size(); ++k)
        out.counter(types[k].labels, "rdma_pci_aer_errors_total", "AER errors of the RDMA device's PCI function by severity and error type (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal).", aer->types[k].count);
    }
    return n > 0 ? health[0] : pci::Health{};
  }

  static void emit_peer_memory(const PeerMemory& pm, MetricSink& out) {
    static const LabelSet none;
    const char* help = "1 when the host offers this GPUDirect RDMA peer-memory path: nvidia_peermem or nv_peer_mem loaded, an MLNX_OFED memory_peers client registered, dma_buf (a kernel >= 5.12).";
    out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.nvidia_peermem, "path", "nvidia_peermem");
    out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.nv_peer_mem, "path", "nv_peer_mem");
    out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.memory_peers, "path", "memory_peers");
    out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.dma_buf, "path", "dma_buf");
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

  void check(MetricSink& out, const char* name, const std::string& subject, bool ok, std::string observed, std::string expected) {
    out.gauge_u64("rdma_topology_check", "1 when the node meets this item of its declared shape (collectors.topology.expect), 0 when not; observed and expected say what was compared.",
                  {{"check", name}, {"subject", subject}, {"observed", std::move(observed)}, {"expected", std::move(expected)}}, ok ? 1 : 0);
  }

  void emit_checks(const exporter::ScrapeContext& ctx, const std::vector<pci::Health>& nic_health, const PeerMemory& pm, MetricSink& out) {
    const auto& t = *topo_;
    const auto& e = expect_;
    if (e.gpus) check(out, "gpus", "host", t.gpus.size() == *e.gpus, std::to_string(t.gpus.size()), std::to_string(*e.gpus));
    for (const auto& pe : e.ports) {
      std::uint32_t good = 0;
      for (const auto& dev : ctx.host.devices) {
        if (!e.covers(dev.name)) continue;
        for (const auto& port : dev.ports) {
          if (port.link_layer != pe.link_layer) continue;
          auto& dir = kept_.at(port.path);
          auto state = dir.read_attribute("state");
          auto rate = dir.read_attribute("rate");
          auto r = rate ? sysfs::parse_rate(rate.value) : std::nullopt;
          const bool active = state && state.value.starts_with("4");
          const bool fast = r && r->bytes_per_second * 8 >= pe.min_rate_gbps * 1000000000ull;
          good += active && fast;
          check(out, "port_rate", dev.name + "/" + port.number_label, active && fast,
                (state ? state.value : "unreadable") + ", " + (rate ? rate.value : "unreadable"),
                "4: ACTIVE, >= " + std::to_string(pe.min_rate_gbps) + " Gb/sec");
          if (pe.link_layer == model::LinkLayer::kEthernet && e.mtu) {
            std::string observed = "no netdev";
            bool ok = false;
            for (const auto& nd : port.netdevs) {
              auto mtu = sysfs::read_attribute(ctx.host.sysfs_root + "/class/net/" + nd.name + "/mtu");
              observed = nd.name + " " + (mtu ? mtu.value : "unreadable");
              ok = mtu && mtu.value == std::to_string(*e.mtu);
              break;
            }
            check(out, "mtu", dev.name + "/" + port.number_label, ok, observed, std::to_string(*e.mtu));
          }
        }
      }
      check(out, "ports", pe.link_layer_name, good == pe.count, std::to_string(good), std::to_string(pe.count));
    }
    for (std::size_t i = 0; i < t.nics.size(); ++i) {
      const auto& nic = t.nics[i];
      if (!e.covers(nic.device)) continue;
      const auto& l = nic_health[i].link;
      if (e.pcie_speed_tenths)
        check(out, "pcie_speed", nic.device, l.current_speed && *l.current_speed >= *e.pcie_speed_tenths,
              l.current_speed ? speed_text(*l.current_speed) : "unknown", ">= " + speed_text(*e.pcie_speed_tenths));
      if (e.pcie_width)
        check(out, "pcie_width", nic.device, l.current_width && *l.current_width >= *e.pcie_width,
              l.current_width ? "x" + std::to_string(*l.current_width) : "unknown", ">= x" + std::to_string(*e.pcie_width));
      if (!e.firmware.empty()) {
        auto it = e.firmware.find(nic.model);
        std::string allowed;
        bool ok = false;
        if (it != e.firmware.end())
          for (const auto& v : it->second) {
            allowed += (allowed.empty() ? "" : "|") + v;
            ok = ok || v == nic.fw_ver;
          }
        check(out, "firmware", nic.device, ok, nic.model + " " + (nic.fw_ver.empty() ? "none" : nic.fw_ver),
              it == e.firmware.end() ? "model " + nic.model + " not listed" : allowed);
      }
    }
    for (std::size_t j = 0; j < t.gpus.size(); ++j) {
      const std::string subject = "gpu" + std::to_string(j) + " " + t.gpus[j].location.bdf();
      std::string nearest;
      for (std::size_t i = 0; i < t.nics.size(); ++i)
        if (t.relation[i][j] == t.gpu_closest[j]) nearest += (nearest.empty() ? "" : ",") + t.nics[i].device;
      if (e.gpu_nic_relation) {
        const bool ok = !t.nics.empty() && t.gpu_closest[j] <= *e.gpu_nic_relation;
        check(out, "gpu_nic_relation", subject, ok,
              t.nics.empty() ? "no NIC" : std::string(pci::relation_name(t.gpu_closest[j])) + " " + nearest,
              "<= " + std::string(pci::relation_name(*e.gpu_nic_relation)));
      }
      if (e.acs_off) {
        std::string on, unknown;
        for (const auto* p : t.paths_of_gpu(j))
          for (const auto& b : p->bridges) {
            if (b.acs.state == pci::Acs::State::kUnreadable) unknown += (unknown.empty() ? "" : ",") + b.bdf;
            else if (b.acs.redirects_p2p()) on += (on.empty() ? "" : ",") + b.bdf;
          }
        const std::string observed = !on.empty() ? "redirect at " + on : !unknown.empty() ? "unknown at " + unknown : "off";
        check(out, "acs_off", subject, on.empty() && unknown.empty(), observed, "off");
      }
    }
    if (e.peer_memory != Expect::PeerMemory::kOff) {
      const bool module = pm.nvidia_peermem || pm.nv_peer_mem || pm.memory_peers;
      const bool ok = e.peer_memory == Expect::PeerMemory::kAny ? pm.any() : module;
      check(out, "peer_memory", "host", ok, pm.observed(),
            e.peer_memory == Expect::PeerMemory::kAny ? "a peer-memory module or dma_buf" : "a peer-memory module");
    }
  }

  Expect expect_;
  std::chrono::milliseconds refresh_;
  std::string procfs_root_;
  std::shared_ptr<const Topology> topo_;
  Key key_;
  std::chrono::steady_clock::time_point built_at_{};
  std::vector<NicState> state_;
  std::shared_ptr<const std::string> static_text_;
  sysfs::KeptDirs kept_;
  std::set<std::string> logged_not_pci_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "topology",
    .help = "PCIe path of each RDMA device (link speed/width per hop, bottleneck, AER), its relation to the GPUs (nvidia-smi topo terms), ACS, peer memory, and checks against collectors.topology.expect.",
    .enabled_by_default = true,
    .settings = {{"expect", exporter::OptionType::kYaml, "",
                  "YAML map of the node's declared shape (docs/metrics.md): devices, gpus, ports, mtu, pcie, gpu_nic_relation, acs_off, peer_memory, firmware."},
                 {"refresh", exporter::OptionType::kDuration, "5m",
                  "The PCI topology (GPUs, relations, ACS) is walked again at least this often, besides whenever bus/pci/devices or the RDMA devices change (0 = only then)."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g) -> std::unique_ptr<exporter::Collector> {
      auto expect = parse_expect(s.yaml("expect"), s.origin("expect"));
      return std::make_unique<TopologyCollector>(std::move(expect), s.duration("refresh"), g.procfs_root);
    },
});

}  // namespace rdma::collectors::topology
