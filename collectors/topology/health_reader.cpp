#include "collectors/topology/health_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "exporter/exposition.h"
#include "sources/pci/parse.h"
#include "sources/sysfs/parse.h"

namespace rdma::collectors::topology {
namespace {

using exporter::Labels;
using exporter::LabelSet;
using exporter::MetricSink;

constexpr const char* kSeverity[] = {"correctable", "nonfatal", "fatal"};

std::string speed_text(std::uint32_t tenths) { return fmt::format("{}.{} GT/s", tenths / 10, tenths % 10); }

void emit_peer_memory(const PeerMemory& pm, MetricSink& out) {
  static const LabelSet none;
  const char* help = "1 when the host offers this GPUDirect RDMA peer-memory path: nvidia_peermem or nv_peer_mem loaded, an MLNX_OFED memory_peers client registered, dma_buf (a kernel >= 5.12).";
  out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.nvidia_peermem, "path", "nvidia_peermem");
  out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.nv_peer_mem, "path", "nv_peer_mem");
  out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.memory_peers, "path", "memory_peers");
  out.gauge_u64(none, "rdma_topology_peer_memory", help, pm.dma_buf, "path", "dma_buf");
}

void check(MetricSink& out, const char* name, const std::string& subject, bool ok, std::string observed, std::string expected) {
  out.gauge_u64("rdma_topology_check", "1 when the node meets this item of its declared shape (collectors.topology.expect), 0 when not; observed and expected say what was compared.",
                {{"check", name}, {"subject", subject}, {"observed", std::move(observed)}, {"expected", std::move(expected)}}, ok ? 1 : 0);
}

}  // namespace

void HealthReader::reset(std::shared_ptr<const Topology> topo, std::shared_ptr<const model::HostModel> host) {
  topo_ = std::move(topo);
  host_ = std::move(host);
  functions_.clear();
  paths_.clear();
  std::unordered_map<std::string, std::size_t> by_dir;
  for (const auto& nic : topo_->nics) {
    const auto& chain = nic.location.chain;
    std::vector<std::size_t> of_chain(chain.size());
    std::size_t parent = kNone;
    // Root port first: a function's parent is listed (and read) before it.
    for (std::size_t i = 0; i < chain.size(); ++i) {
      auto dir = nic.location.dir_of(i);
      auto [it, fresh] = by_dir.emplace(dir, functions_.size());
      if (fresh) functions_.push_back(Function{std::move(dir), parent, false, {}, false, {}, {}});
      parent = of_chain[i] = it->second;
    }
    NicPath p;
    p.device_labels = LabelSet(Labels{{"device", nic.device}});
    for (std::size_t h = 0; h < chain.size(); ++h) {
      const std::size_t idx = chain.size() - 1 - h;
      p.functions.push_back(of_chain[idx]);
      p.hop_labels.emplace_back(Labels{{"device", nic.device}, {"pci_function", chain[idx]}, {"hop", std::to_string(h)}});
    }
    if (!chain.empty()) functions_[of_chain.back()].aer_types = true;
    paths_.push_back(std::move(p));
  }
}

std::string HealthReader::read(Issues& issues) {
  MetricSink out;
  health_.assign(functions_.size(), pci::Health{});
  std::vector<const sysfs::KeptDir*> dirs(functions_.size(), nullptr);
  for (std::size_t k = 0; k < functions_.size(); ++k) {
    auto& f = functions_[k];
    auto& dir = kept_.at(f.ref, f.dir, f.parent == kNone ? nullptr : dirs[f.parent]);
    dirs[k] = &dir;
    auto& h = health_[k];
    h = pci::read_health(dir, f.aer_types, !f.have_maxima, issues);
    if (!f.have_maxima) {
      f.have_maxima = true;
      f.max_speed = h.link.max_speed;
      f.max_width = h.link.max_width;
    }
    h.link.max_speed = f.max_speed;
    h.link.max_width = f.max_width;
  }
  std::vector<const pci::Health*> nic_health;
  nic_health.reserve(paths_.size());
  for (auto& p : paths_) nic_health.push_back(emit_path(p, out));
  const auto pm = read_peer_memory(host_->sysfs_root, procfs_root_);
  emit_peer_memory(pm, out);
  if (expect_.present) emit_checks(nic_health, pm, out);
  kept_.sweep();
  std::string text;
  exporter::write_text(out, text);
  return text;
}

const pci::Health* HealthReader::emit_path(NicPath& p, MetricSink& out) {
  const std::size_t n = p.functions.size();
  auto health = [&](std::size_t hop) -> const pci::Health& { return health_[p.functions[hop]]; };
  // Links: a PCIe path alternates upstream-facing (endpoint, switch upstream port) and
  // downstream-facing ports (switch downstream port, root port) from the function up, so hops
  // (0,1), (2,3), ... are the two ends of one physical link. A link is degraded when it trains
  // below what both ends support; the bottleneck is the link with the lowest bandwidth (the
  // nearest to the function among equals), named by its downstream-facing port (the slot).
  std::vector<int> degraded(n, -1);  // -1: no link files
  std::size_t bottleneck = n;
  double lowest = 0;
  for (std::size_t lo = 0; lo < n; lo += 2) {
    const std::size_t hi = lo + 1 < n ? lo + 1 : lo;
    auto min_of = [&](auto field) {
      std::optional<std::uint32_t> v;
      for (std::size_t k : {lo, hi})
        if (auto x = health(k).link.*field) v = v ? std::min(*v, *x) : *x;
      return v;
    };
    const auto cur_s = min_of(&pci::Link::current_speed), max_s = min_of(&pci::Link::max_speed);
    const auto cur_w = min_of(&pci::Link::current_width), max_w = min_of(&pci::Link::max_width);
    if (!health(lo).link.present() && !health(hi).link.present()) continue;
    const bool bad = (cur_s && max_s && *cur_s < *max_s) || (cur_w && max_w && *cur_w < *max_w) ||
                     (max_w && cur_w && *cur_w == 0);
    for (std::size_t k : {lo, hi})
      if (health(k).link.present()) degraded[k] = bad ? 1 : 0;
    if (cur_s && cur_w) {
      const double bw = pci::lane_bytes_per_second(*cur_s) * *cur_w;
      if (bottleneck == n || bw < lowest) {
        bottleneck = hi;
        lowest = bw;
      }
    }
  }
  for (std::size_t h = 0; h < n; ++h) {
    const auto& l = health(h).link;
    const auto& ls = p.hop_labels[h];
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
      if (const auto& aer = health(h).aer[s]; aer && aer->total)
        out.add(ls, "rdma_pci_aer_reports_total", exporter::MetricType::kCounter, "AER error reports of the function at this hop (TOTAL_ERR_* of aer_dev_*), by aer_severity.", *aer->total, "aer_severity", kSeverity[s]);
  }
  if (bottleneck < n)
    out.gauge(p.device_labels, "rdma_pci_path_bandwidth_bytes_per_second", "Bandwidth of the bottleneck link between the RDMA device and its root port after line encoding, in bytes per second.", lowest);
  // Per error type: the device's own function only (the bridges' totals are above).
  for (std::size_t s = 0; s < 3 && n > 0; ++s) {
    const auto& aer = health(0).aer[s];
    if (!aer) continue;
    auto& types = p.aer_types[s];
    bool same = types.size() == aer->types.size();
    for (std::size_t k = 0; same && k < types.size(); ++k) same = types[k].name == aer->types[k].name;
    if (!same) {
      types.clear();
      for (const auto& t : aer->types) {
        Labels l = p.hop_labels[0].labels();
        l.emplace_back("aer_severity", kSeverity[s]);
        l.emplace_back("type", t.name);
        types.push_back({t.name, LabelSet(std::move(l))});
      }
    }
    for (std::size_t k = 0; k < types.size(); ++k)
      out.counter(types[k].labels, "rdma_pci_aer_errors_total", "AER errors of the RDMA device's PCI function by severity and error type (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal).", aer->types[k].count);
  }
  return n > 0 ? &health(0) : nullptr;
}

void HealthReader::emit_checks(const std::vector<const pci::Health*>& nic_health, const PeerMemory& pm, MetricSink& out) {
  const auto& t = *topo_;
  const auto& e = expect_;
  if (e.gpus) check(out, "gpus", "host", t.gpus.size() == *e.gpus, std::to_string(t.gpus.size()), std::to_string(*e.gpus));
  for (const auto& pe : e.ports) {
    std::uint32_t good = 0;
    for (const auto& dev : host_->devices) {
      if (!e.covers(dev.name)) continue;
      for (const auto& port : dev.ports) {
        if (port.link_layer != pe.link_layer) continue;
        auto& dir = kept_.at(port.path);
        auto state = dir.read_attribute("state");
        auto rate = dir.read_attribute("rate");
        auto parsed = rate ? sysfs::parse_rate(rate.value) : std::nullopt;
        const bool active = state && state.value.starts_with("4");
        const bool fast = parsed && parsed->bytes_per_second * 8 >= pe.min_rate_gbps * 1000000000ull;
        good += active && fast;
        check(out, "port_rate", dev.name + "/" + port.number_label, active && fast,
              (state ? state.value : "unreadable") + ", " + (rate ? rate.value : "unreadable"),
              "4: ACTIVE, >= " + std::to_string(pe.min_rate_gbps) + " Gb/sec");
        if (pe.link_layer == model::LinkLayer::kEthernet && e.mtu) {
          std::string observed = "no netdev";
          bool ok = false;
          for (const auto& nd : port.netdevs) {
            auto mtu = kept_.at(host_->sysfs_root + "/class/net/" + nd.name).read_attribute("mtu");
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
    const pci::Link l = nic_health[i] ? nic_health[i]->link : pci::Link{};
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

}  // namespace rdma::collectors::topology
