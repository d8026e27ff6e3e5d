#include "collectors/prober/verbs/verbs_util.h"

#include <algorithm>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <regex>

#include "collectors/prober/wire/handshake_io.h"

namespace rdma::collectors::prober {

std::string wc_reason(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR: return "completion_retry_exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "completion_rnr_retry_exceeded";
    case IBV_WC_REM_ACCESS_ERR: return "completion_remote_access";
    case IBV_WC_REM_INV_REQ_ERR: return "completion_remote_invalid_request";
    case IBV_WC_REM_OP_ERR: return "completion_remote_operation";
    case IBV_WC_LOC_PROT_ERR: return "completion_local_protection";
    case IBV_WC_LOC_QP_OP_ERR: return "completion_local_qp_operation";
    case IBV_WC_WR_FLUSH_ERR: return "completion_flushed";
    default: return "completion_other";
  }
}

std::vector<VerbsPort> query_ports(ibv_context* ctx, std::uint32_t port_count) {
  std::vector<VerbsPort> out;
  for (std::uint32_t p = 1; p <= port_count; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<std::uint8_t>(p), &pa)) continue;
    if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET) continue;
    out.push_back({p, pa.link_layer == IBV_LINK_LAYER_INFINIBAND, pa.lid, static_cast<std::uint8_t>(pa.active_mtu),
                   pa.gid_tbl_len, pa.state == IBV_PORT_ACTIVE});
  }
  return out;
}

ProbeDevice::~ProbeDevice() {
  if (dst_mr) ibv_dereg_mr(dst_mr);
  if (src_mr) ibv_dereg_mr(src_mr);
  if (cq) ibv_destroy_cq(cq);
  if (idle_cq) ibv_destroy_cq(idle_cq);
  if (channel) ibv_destroy_comp_channel(channel);
  if (pd) ibv_dealloc_pd(pd);
  if (ctx && !shared_ctx) ibv_close_device(ctx);
}

std::optional<VerbsPort> ProbeDevice::port(std::uint32_t n) const {
  std::lock_guard lock(ports_mu_);
  for (const auto& p : ports_)
    if (p.num == n) return p;
  return std::nullopt;
}

std::vector<VerbsPort> ProbeDevice::ports() const {
  std::lock_guard lock(ports_mu_);
  return ports_;
}

void ProbeDevice::set_ports(std::vector<VerbsPort> p) {
  std::lock_guard lock(ports_mu_);
  ports_ = std::move(p);
}

std::vector<VerbsPort> ProbeDevice::refresh_ports() {
  std::vector<VerbsPort> fresh = query_ports(ctx, port_count), changed;
  std::lock_guard lock(ports_mu_);
  for (auto& p : ports_) {  // the set of ports stays the one found at open
    auto f = std::find_if(fresh.begin(), fresh.end(), [&p](const VerbsPort& x) { return x.num == p.num; });
    const VerbsPort now = f != fresh.end() ? *f : VerbsPort{p.num, p.ib, 0, p.mtu, p.gid_len, false};
    if (now.active != p.active) changed.push_back(now);
    p = now;
  }
  return changed;
}

std::vector<std::unique_ptr<ProbeDevice>> open_probe_devices(
    const std::string& device_regex, std::size_t payload, std::string& no_devices, std::vector<std::string>& problems,
    const std::function<std::shared_ptr<ibv_context>(const std::string&)>& shared_context) {
  std::vector<std::unique_ptr<ProbeDevice>> out;
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    no_devices = list ? "no RDMA device found" : std::string("ibv_get_device_list: ") + std::strerror(errno ? errno : ENODEV);
    if (list) ibv_free_device_list(list);
    return out;
  }
  std::regex re(device_regex.empty() ? ".*" : device_regex);
  for (int i = 0; i < n; ++i) {
    std::string name = ibv_get_device_name(list[i]);
    if (!std::regex_match(name, re)) continue;
    auto d = std::make_unique<ProbeDevice>();
    d->name = name;
    if (shared_context) d->shared_ctx = shared_context(name);
    d->ctx = d->shared_ctx ? d->shared_ctx.get() : ibv_open_device(list[i]);
    if (!d->ctx) {
      problems.push_back(name + ": ibv_open_device failed");
      continue;
    }
    ibv_device_attr_ex ax{};
    if (ibv_query_device_ex(d->ctx, nullptr, &ax)) {
      problems.push_back(name + ": ibv_query_device_ex failed");
      continue;
    }
    d->pd = ibv_alloc_pd(d->ctx);
    d->channel = ibv_create_comp_channel(d->ctx);
    const int cqe = static_cast<int>(std::min<std::int64_t>(ax.orig_attr.max_cqe, 4096));
    if (!d->pd || !d->channel) {
      problems.push_back(name + ": cannot allocate a PD or completion channel");
      continue;
    }
    if (ax.completion_timestamp_mask && ax.hca_core_clock) {
      ibv_cq_init_attr_ex ca{};
      ca.cqe = static_cast<std::uint32_t>(cqe);
      ca.channel = d->channel;
      ca.wc_flags = static_cast<std::uint64_t>(IBV_WC_STANDARD_FLAGS) | static_cast<std::uint64_t>(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
      d->cqx = ibv_create_cq_ex(d->ctx, &ca);
      if (d->cqx) {
        d->cq = ibv_cq_ex_to_cq(d->cqx);
        d->clock_khz = ax.hca_core_clock;
        d->ts_mask = ax.completion_timestamp_mask;
      }
    }
    if (!d->cq) d->cq = ibv_create_cq(d->ctx, cqe, nullptr, d->channel, 0);
    d->idle_cq = ibv_create_cq(d->ctx, 1, nullptr, nullptr, 0);
    d->src.assign(std::max<std::size_t>(payload, 1), 0x5a);
    d->dst.assign(std::max<std::size_t>(payload, 1), 0);
    // int{}: verbs.h's ibv_reg_mr macro ANDs the flags with another enum's enumerator (deprecated).
    if (d->cq) d->src_mr = ibv_reg_mr(d->pd, d->src.data(), d->src.size(), int{IBV_ACCESS_LOCAL_WRITE});
    if (d->src_mr) d->dst_mr = ibv_reg_mr(d->pd, d->dst.data(), d->dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!d->cq || !d->idle_cq || !d->dst_mr) {
      problems.push_back(name + ": cannot create CQs or register memory");
      continue;
    }
    d->port_count = ax.orig_attr.phys_port_cnt;
    d->set_ports(query_ports(d->ctx, d->port_count));
    if (!d->ports().empty()) out.push_back(std::move(d));
  }
  ibv_free_device_list(list);
  return out;
}

ibv_qp* create_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t max_send_wr) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = max_send_wr;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.sq_sig_all = 0;
  return ibv_create_qp(pd, &ia);
}

std::string connect_qp(ibv_qp* qp, const VerbsPort& port, int sgid, std::uint32_t my_psn,
                       const Endpoint& remote, TrafficClass tc, std::uint32_t flow_label) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = static_cast<std::uint8_t>(port.num);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return "qp_init";
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min(port.mtu, remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<std::uint8_t>(port.num);
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.sl = tc.service_level;
  if (remote.is_global || !port.ib) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(sgid);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = tc.traffic_class;
    a.ah_attr.grh.flow_label = flow_label & 0xFFFFF;
  }
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                        IBV_QP_MIN_RNR_TIMER))
    return "qp_rtr";
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;  // 4.096 µs * 2^14 = 67 ms per try; 7 retries: an error completion after ~0.5 s
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = my_psn;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                IBV_QP_MAX_QP_RD_ATOMIC))
    return "qp_rts";
  return "";
}

int choose_gid(ibv_context* ctx, const VerbsPort& port, int configured, bool v4,
               const std::optional<Gid>& want, Gid& out) {
  auto read = [&](int i, ibv_gid_entry& e) { return ibv_query_gid_ex(ctx, port.num, static_cast<std::uint32_t>(i), &e, 0) == 0; };
  ibv_gid_entry e{};
  if (configured >= 0) {
    if (!read(configured, e)) return -1;
    std::memcpy(out.data(), e.gid.raw, 16);
    return configured;
  }
  if (port.ib) {
    if (!read(0, e)) return -1;
    std::memcpy(out.data(), e.gid.raw, 16);
    return 0;
  }
  int fallback = -1;
  for (int i = 0; i < std::min(port.gid_len, 256); ++i) {
    if (!read(i, e) || e.gid_type != IBV_GID_TYPE_ROCE_V2) continue;
    if (want && std::memcmp(e.gid.raw, want->data(), 16) == 0) {
      std::memcpy(out.data(), e.gid.raw, 16);
      return i;
    }
    const bool is_v4 = v4_mapped(e.gid.raw);
    const bool link_local = e.gid.raw[0] == 0xfe && (e.gid.raw[1] & 0xc0) == 0x80;
    if (fallback < 0 && is_v4 == v4 && !link_local) {
      std::memcpy(out.data(), e.gid.raw, 16);
      fallback = i;
    }
  }
  return want ? -1 : fallback;
}

int choose_source_gid(ibv_context* ctx, const VerbsPort& port, int configured, const std::string& peer, Gid& out) {
  const bool v4 = peer.find(':') == std::string::npos;
  if (configured < 0 && !port.ib)
    for (const auto& want : source_gids_for(peer))
      if (int g = choose_gid(ctx, port, -1, v4, want, out); g >= 0) return g;
  return choose_gid(ctx, port, configured, v4, std::nullopt, out);
}

std::vector<TablePort> describe_ports(const std::vector<std::unique_ptr<ProbeDevice>>& devices, const std::vector<RailRule>& rails) {
  const auto addresses = interface_addresses();
  auto prefix_of = [&](const std::string& netdev, const Gid& gid) -> std::uint8_t {
    for (const auto& a : addresses)
      if (a.netdev == netdev && a.address == gid) return a.prefix_len;
    return 0;  // a GID whose address the netdev no longer has: not routable for pairing
  };
  std::vector<TablePort> out;
  for (const auto& d : devices)
    for (const auto& p : d->ports()) {
      if (out.size() == kMaxTablePorts) return out;
      TablePort t;
      t.device = d->name.substr(0, kMaxTableString);
      t.port = static_cast<std::uint8_t>(std::min<std::uint32_t>(p.num, 255));
      t.link_layer = p.ib ? LinkLayer::kInfiniBand : LinkLayer::kEthernet;
      t.state = p.active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
      t.lid = p.lid;
      std::vector<TableGid> routable, other;
      for (int i = 0; i < std::min(p.gid_len, 256); ++i) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(d->ctx, p.num, static_cast<std::uint32_t>(i), &e, 0) != 0) continue;  // an empty entry
        TableGid g;
        std::memcpy(g.gid.data(), e.gid.raw, 16);
        if (g.gid == Gid{}) continue;
        if (p.ib) {
          for (int k = 0; k < 8; ++k) t.subnet_prefix = (t.subnet_prefix << 8) | g.gid[static_cast<std::size_t>(k)];
          g.kind = GidKind::kIb;
          t.gids.push_back(g);
          break;  // GID 0 names the port; its prefix is the subnet's
        }
        g.kind = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidKind::kRoceV2 : GidKind::kRoceV1;
        char name[IF_NAMESIZE] = {};
        if (e.ndev_ifindex && if_indextoname(e.ndev_ifindex, name)) g.netdev = std::string(name).substr(0, kMaxTableString);
        g.prefix_len = prefix_of(g.netdev, g.gid);
        const bool link_local = g.gid[0] == 0xfe && (g.gid[1] & 0xc0) == 0x80;
        (g.kind == GidKind::kRoceV2 && !link_local && g.prefix_len ? routable : other).push_back(std::move(g));
      }
      // The GIDs pairing can use first: a port with many VLANs may have more than the table holds.
      for (auto* list : {&routable, &other})
        for (auto& g : *list)
          if (t.gids.size() < kMaxPortGids) t.gids.push_back(std::move(g));
      t.rail = rail_of(t, rails).substr(0, kMaxTableString);
      out.push_back(std::move(t));
    }
  return out;
}

std::uint32_t random_psn() {
  // One draw per connection, so no engine is kept: a thread_local std::mt19937 was 5,000 bytes
  // of static TLS that every thread of the process (75 of them) got a zeroed copy of.
  return std::random_device{}() & 0xffffff;
}
ibv_send_wr signaled_write(ibv_sge& sge, const Endpoint& remote, std::uint64_t wr_id) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote.addr;
  wr.wr.rdma.rkey = remote.rkey;
  return wr;
}

}  // namespace rdma::collectors::prober
