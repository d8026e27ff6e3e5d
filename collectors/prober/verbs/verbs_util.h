// Verbs device resources shared by the prober's transport (verbs_transport.cpp), its responder
// (responder.cpp) and the on-demand probe sessions (probe_session.cpp): the devices the prober
// opens with their PD, CQs and probe buffers, RC queue pair creation and INIT -> RTR -> RTS, and
// the source GID choice. The socket side of the handshake is handshake_io.h.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectors/prober/wire/handshake.h"
#include "collectors/prober/engine/pairing.h"

namespace rdma::collectors::prober {

// A failed work completion as an error label: completion_retry_exceeded, completion_flushed, ...
std::string wc_reason(ibv_wc_status s);

// A port as the prober uses it.
struct VerbsPort {
  std::uint32_t num = 0;
  bool ib = false;
  std::uint16_t lid = 0;
  std::uint8_t mtu = 0;  // enum ibv_mtu
  int gid_len = 0;
  bool active = false;
};
// The InfiniBand and Ethernet ports of an open device.
std::vector<VerbsPort> query_ports(ibv_context* ctx, std::uint32_t port_count);

// A device the prober probes from and answers on: its PD, the probes' CQ on a completion
// channel, an idle CQ for responder QPs, the probe source buffer and the buffer peers write to.
struct ProbeDevice {
  std::string name;
  ibv_context* ctx = nullptr;
  // Set when ctx is the daemon's shared context (sources/verbs/device_events.h), which reads its
  // async events; not closed here. Unset: ctx is the prober's own and the transport reads them.
  std::shared_ptr<ibv_context> shared_ctx;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;         // the probes' send CQ (classic, or the ibv_cq_ex below)
  ibv_cq_ex* cqx = nullptr;     // set when completion timestamps are used
  ibv_cq* idle_cq = nullptr;    // responder QPs: never gets completions
  std::uint64_t clock_khz = 0, ts_mask = 0;
  std::vector<std::uint8_t> src, dst;
  ibv_mr* src_mr = nullptr;
  ibv_mr* dst_mr = nullptr;
  std::uint32_t port_count = 0;  // phys_port_cnt
  // The transport's loop thread only. outstanding: probes posted on live connections and not yet
  // polled; armed: ibv_req_notify_cq done and its event not yet read. The CQ is armed only before
  // a sleep with probes outstanding, so that a completion found by polling costs no wake-up.
  std::uint64_t outstanding = 0;
  bool armed = false;

  ProbeDevice() = default;
  ProbeDevice(const ProbeDevice&) = delete;
  ProbeDevice& operator=(const ProbeDevice&) = delete;
  ~ProbeDevice();
  std::optional<VerbsPort> port(std::uint32_t n) const;
  std::vector<VerbsPort> ports() const;
  void set_ports(std::vector<VerbsPort> p);
  // Queries the ports again (LID, MTU, state, GID table size: an SM assigns a LID late, a cable
  // is pulled) and returns those whose ACTIVE state changed. Any thread.
  std::vector<VerbsPort> refresh_ports();

 private:
  mutable std::mutex ports_mu_;  // ports_: read by the connector and responder, refreshed by the loop
  std::vector<VerbsPort> ports_;
};

// Opens every device whose name matches `device_regex` (empty: all) and has an InfiniBand or
// Ethernet port, with `payload`-byte buffers; completion timestamps where the device has them.
// Devices that cannot be set up are skipped with a line in `problems`; `no_devices` says why when
// the system lists no RDMA device at all.
// `shared_context`, when given, is asked first for a device's context (the daemon's owner).
std::vector<std::unique_ptr<ProbeDevice>> open_probe_devices(
    const std::string& device_regex, std::size_t payload, std::string& no_devices, std::vector<std::string>& problems,
    const std::function<std::shared_ptr<ibv_context>(const std::string&)>& shared_context = {});

// An RC queue pair on `cq` for RDMA WRITEs.
ibv_qp* create_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t max_send_wr = 16);
// The class a QP's packets travel in: RoCE v2 carries traffic_class as the IP TOS byte (DSCP <<
// 2 | ECN), InfiniBand in the GRH; service_level is the InfiniBand SL (on RoCE the VLAN PCP
// where a VLAN is used).
struct TrafficClass {
  std::uint8_t traffic_class = 0;
  std::uint8_t service_level = 0;  // 0..15
  bool operator==(const TrafficClass&) const = default;
};
// INIT -> RTR -> RTS towards `remote`. Returns an error label (qp_init, qp_rtr, qp_rts) or "".
// `flow_label` goes into the GRH: RoCE v2 takes the UDP source port from it (rxe, mlx5:
// flow_label_to_udp_sport, trace_packet.h), so the prober knows each flow's 5-tuple. 0 (the
// responder's QPs): the kernel derives it from the QP numbers (calc_flow_label, symmetric), which
// both ends can compute too (docs/prober.md, Flows).
std::string connect_qp(ibv_qp* qp, const VerbsPort& port, int sgid, std::uint32_t my_psn, const Endpoint& remote,
                       TrafficClass tc = {}, std::uint32_t flow_label = 0);
// GID to use on a port: the configured index, else (RoCE) the RoCE v2 GID of the wanted family,
// or the one equal to `want` when given. -1 = none.
int choose_gid(ibv_context* ctx, const VerbsPort& port, int configured, bool v4, const std::optional<Gid>& want, Gid& out);
// The source GID towards the numeric `peer` address: the configured index; else (RoCE) the GID
// of the port that source_gids_for() ranks first (the netdev, VLAN included, that reaches the
// peer); else the first RoCE v2 GID of the peer's family (InfiniBand: GID 0). -1 = none.
int choose_source_gid(ibv_context* ctx, const VerbsPort& port, int configured, const std::string& peer, Gid& out);
// This host's ports as a port table describes them (handshake.h): link layer, state, LID, the
// InfiniBand subnet prefix, the GIDs with their type, netdev and the prefix length of the
// netdev's address (routable RoCE v2 GIDs first, at most kMaxPortGids) and the rail label the
// rules give it (pairing.h, rail_of). What the responder sends and what the prober pairs from.
// Any thread.
std::vector<TablePort> describe_ports(const std::vector<std::unique_ptr<ProbeDevice>>& devices, const std::vector<RailRule>& rails);
std::uint32_t random_psn();
// A signaled RDMA WRITE of `sge` (which must outlive the post) to the remote's buffer.
ibv_send_wr signaled_write(ibv_sge& sge, const Endpoint& remote, std::uint64_t wr_id);

}  // namespace rdma::collectors::prober
