#include "collectors/pma/fabric_sm.h"

#include "collectors/pma/fabric.h"

#include <infiniband/ibnetdisc.h>
#include <infiniband/mad.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "sources/mad/pma_decode.h"

namespace rdma::collectors::pma {

void note_sm_ports(const ibnd_node* n, const std::string& guid_label, const std::string& name, std::vector<SmPort>& out,
                   std::map<std::uint16_t, unsigned>& master_lids) {
  if (!n->ports) return;
  const bool sw = n->type == IB_NODE_SWITCH;
  for (int p = sw ? 0 : 1; p <= (sw ? 0 : n->numports); ++p) {
    const ibnd_port_t* port = n->ports[p];
    if (!port) continue;
    const auto pi = mad::decode_port_info(port->info);
    if (!pi || !pi->lid) continue;
    if (pi->master_sm_lid) ++master_lids[pi->master_sm_lid];
    if (pi->is_sm()) out.push_back({pi->lid, guid_label, name, p});
  }
}

std::vector<SmPort> sm_ports_to_poll(std::vector<SmPort> found, const std::map<std::uint16_t, unsigned>& master_lids) {
  auto most = std::max_element(master_lids.begin(), master_lids.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most != master_lids.end() &&
      std::none_of(found.begin(), found.end(), [&](const SmPort& s) { return s.lid == most->first; }))
    found.push_back({most->first, "", "", 0});
  return found;
}

void FabricLoop::poll_subnet_managers() {
  const std::shared_ptr<const Topology> topo = topology();
  const std::shared_ptr<mad::MadClient> c = client();
  if (!topo || !c) return;
  c->exclusive([&] {
    std::lock_guard setup(mad::umad_setup_mutex());
    sm_.poll(topo->sm_ports, o_.ca, o_.port, o_.query);
  });
}

void SmMonitor::poll(const std::vector<SmPort>& ports, const std::string& ca, int port, const mad::QueryOptions& q) {
  madrpc_show_errors(0);  // a stopped SM is counted, not printed by libibmad on every refresh
  int classes[] = {IB_SMI_CLASS};
  std::string ca_name = ca;
  ibmad_port* src = mad_rpc_open_port(ca_name.empty() ? nullptr : ca_name.data(), port, classes, 1);
  if (!src) {
    ++c_->failures;
    return;
  }
  const int timeout_ms = static_cast<int>(std::max<std::int64_t>(1, q.timeout.count()));
  mad_rpc_set_timeout(src, timeout_ms);
  // One attempt: the MAD port is held exclusively meanwhile (target scrapes wait), and an SM that
  // misses one poll only drops out of one refresh's series. libibmad's "retries" is the number of
  // attempts, and 0 means its default of 3: an SM that stopped cost three timeouts (and three
  // drops on ibsim) per refresh.
  (void)q.retries;
  mad_rpc_set_retries(src, 1);
  std::map<std::uint64_t, Sm> now;
  for (std::size_t i = 0; i < ports.size() && i < kMaxSms; ++i) {
    ib_portid_t id{};
    ib_portid_set(&id, ports[i].lid, 0, 0);
    std::uint8_t buf[IB_SMP_DATA_SIZE] = {};
    ++c_->mads;
    if (!smp_query_via(buf, &id, IB_ATTR_SMINFO, 0, static_cast<unsigned>(timeout_ms), src)) {
      ++c_->failures;  // an SM that stopped: its port may still say IsSM until the next discovery
      continue;
    }
    const auto info = mad::decode_sm_info(std::span<const std::uint8_t>(buf, sizeof buf));
    if (!info || !info->guid) continue;
    Sm sm{ports[i], *info, 0};
    if (auto old = sms_.find(info->guid); old != sms_.end())
      sm.unchanged = old->second.info.act_count == info->act_count ? old->second.unchanged + 1 : 0;
    now[info->guid] = std::move(sm);
  }
  mad_rpc_close_port(src);
  sms_ = std::move(now);
  std::vector<std::uint64_t> masters;
  for (const auto& [guid, sm] : sms_)
    if (sm.info.state == 3) masters.push_back(guid);
  if (masters.size() == 1) {
    if (master_ && masters[0] != master_) {
      ++c_->master_changes;
      spdlog::info("pma fabric: the master SM is now {} (was {})", mad::guid_label(masters[0]), mad::guid_label(master_));
    }
    master_ = masters[0];
  }
  polled_ = true;
}

void SmMonitor::emit(exporter::MetricSink& out) const {
  if (!polled_) return;
  std::uint64_t masters = 0;
  for (const auto& [guid, sm] : sms_) {
    const exporter::Labels id{{"sm_guid", mad::guid_label(guid)}};
    exporter::Labels info = id;
    info.emplace_back("node_guid", sm.where.node_guid);
    info.emplace_back("node_name", sm.where.node_name);
    info.emplace_back("port", std::to_string(sm.where.port));
    info.emplace_back("lid", std::to_string(sm.where.lid));
    out.info("rdma_pma_fabric_sm_info",
             "A subnet manager that answered SMInfo: its GUID, the node and port it runs on, its LID (join "
             "rdma_port_sm_lid on the value).",
             std::move(info));
    for (std::uint8_t s = 0; s <= 3; ++s) {
      exporter::Labels l = id;
      l.emplace_back("state", std::string(mad::sm_state_name(s)));
      out.gauge_u64("rdma_pma_fabric_sm_state", "1 for the SM's SMInfo state (master, standby, discovering, not_active).",
                    std::move(l), sm.info.state == s ? 1 : 0);
    }
    out.gauge_u64("rdma_pma_fabric_sm_priority", "SMInfo priority (0-15; the highest becomes master).", id, sm.info.priority);
    out.gauge_u64("rdma_pma_fabric_sm_act_count",
                  "SMInfo ActCount: the heartbeat a running SM advances (32 bits, wraps; restarts with the SM).", id,
                  sm.info.act_count);
    out.gauge_u64("rdma_pma_fabric_sm_stuck",
                  "1 when the SM's ActCount did not advance over the last fabric-sm-stuck-polls SMInfo polls.", id,
                  sm.unchanged >= stuck_polls_ ? 1 : 0);
    masters += sm.info.state == 3;
  }
  out.gauge_u64("rdma_pma_fabric_sm_masters", "SMs answering SMInfo in the master state (1 is healthy; 0 and >1 are faults).",
                {}, masters);
  out.counter("rdma_pma_fabric_sm_master_changes_total", "Changes of the master SM's GUID seen between SMInfo polls.", {},
              c_->master_changes);
  out.counter("rdma_pma_fabric_sm_mads_total", "SMInfo SMPs sent (one per SM port and refresh).", {}, c_->mads);
  out.counter("rdma_pma_fabric_sm_query_failures_total",
              "SMInfo queries that got no answer (an SM that stopped, until a discovery drops its port).", {}, c_->failures);
}

}  // namespace rdma::collectors::pma
