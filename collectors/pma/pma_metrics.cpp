#include "collectors/pma/pma_metrics.h"

#include <algorithm>
#include <cstdint>
#include <functional>

namespace rdma::collectors::pma {
namespace {

using mad::PmaAttr;

struct Def {
  const char* name;  // after the prefix, without _total
  PmaAttr attr;
  unsigned width;    // bits in the attribute
  unsigned scale;    // 4 for data words -> bytes
  const char* help;
  std::function<std::optional<std::uint64_t>(const PortReadings&)> get;
};

template <class Opt, class F>
std::function<std::optional<std::uint64_t>(const PortReadings&)> field(Opt PortReadings::*member, F f) {
  return [member, f](const PortReadings& r) -> std::optional<std::uint64_t> {
    const auto& o = r.*member;
    if (!o) return std::nullopt;
    return static_cast<std::uint64_t>(f(*o));
  };
}

#define PC(m) field(&PortReadings::pc, [](const mad::PortCounters& c) { return c.m; })
#define EXT(m) field(&PortReadings::ext, [](const mad::PortCountersExtended& c) { return c.m; })
#define RE(m) field(&PortReadings::rcv_err, [](const mad::PortRcvErrorDetails& c) { return c.m; })
#define XD(m) field(&PortReadings::xmit_disc, [](const mad::PortXmitDiscardDetails& c) { return c.m; })

// Data and packet counters come from PortCountersExtended (64-bit) when the port has it, else from
// PortCounters (32-bit, saturating): emit_port picks.
const std::vector<Def>& defs() {
  static const std::vector<Def> d = {
      {"symbol_errors", PmaAttr::kPortCounters, 16, 1, "Minor link errors detected on one or more physical lanes (PortCounters, 16-bit).", PC(symbol_errors)},
      {"link_error_recovery", PmaAttr::kPortCounters, 8, 1, "Successful link error recovery processes (PortCounters, 8-bit).", PC(link_error_recovery)},
      {"link_downed", PmaAttr::kPortCounters, 8, 1, "Link error recoveries that failed and downed the link (PortCounters, 8-bit).", PC(link_downed)},
      {"receive_errors", PmaAttr::kPortCounters, 16, 1, "Received packets containing an error (PortCounters, 16-bit).", PC(rcv_errors)},
      {"receive_remote_physical_errors", PmaAttr::kPortCounters, 16, 1, "Received packets marked with the EBP delimiter (PortCounters, 16-bit).", PC(rcv_remote_physical_errors)},
      {"receive_switch_relay_errors", PmaAttr::kPortCounters, 16, 1, "Received packets discarded because they could not be forwarded (PortCounters, 16-bit).", PC(rcv_switch_relay_errors)},
      {"transmit_discards", PmaAttr::kPortCounters, 16, 1, "Outbound packets discarded (port down or congestion) (PortCounters, 16-bit).", PC(xmit_discards)},
      {"transmit_constraint_errors", PmaAttr::kPortCounters, 8, 1, "Packets not transmitted because of constraints (PortCounters, 8-bit).", PC(xmit_constraint_errors)},
      {"receive_constraint_errors", PmaAttr::kPortCounters, 8, 1, "Packets received and discarded because of constraints (PortCounters, 8-bit).", PC(rcv_constraint_errors)},
      {"local_link_integrity_errors", PmaAttr::kPortCounters, 4, 1, "Times the local physical errors exceeded the threshold (PortCounters, 4-bit).", PC(local_link_integrity_errors)},
      {"excessive_buffer_overrun_errors", PmaAttr::kPortCounters, 4, 1, "Times consecutive buffer overruns exceeded the threshold (PortCounters, 4-bit).", PC(excessive_buffer_overrun_errors)},
      {"qp1_dropped", PmaAttr::kPortCounters, 16, 1, "QP1 MADs dropped (PortCounters, 16-bit).", PC(qp1_dropped)},
      {"vl15_dropped", PmaAttr::kPortCounters, 16, 1, "Incoming VL15 packets dropped (PortCounters, 16-bit).", PC(vl15_dropped)},
      {"transmit_wait", PmaAttr::kPortCounters, 32, 1, "Ticks during which the port had data to send but no flow-control credits (PortXmitWait, 32-bit).", nullptr},
      {"transmit_bytes", PmaAttr::kPortCountersExtended, 64, 4, "Data octets transmitted (PortXmitData x 4; 64-bit extended counter, else 32-bit).", nullptr},
      {"receive_bytes", PmaAttr::kPortCountersExtended, 64, 4, "Data octets received (PortRcvData x 4; 64-bit extended counter, else 32-bit).", nullptr},
      {"transmit_packets", PmaAttr::kPortCountersExtended, 64, 1, "Packets transmitted (64-bit extended counter, else 32-bit).", nullptr},
      {"receive_packets", PmaAttr::kPortCountersExtended, 64, 1, "Packets received (64-bit extended counter, else 32-bit).", nullptr},
      {"unicast_transmit_packets", PmaAttr::kPortCountersExtended, 64, 1, "Unicast packets transmitted (PortCountersExtended).", EXT(unicast_xmit_pkts)},
      {"unicast_receive_packets", PmaAttr::kPortCountersExtended, 64, 1, "Unicast packets received (PortCountersExtended).", EXT(unicast_rcv_pkts)},
      {"multicast_transmit_packets", PmaAttr::kPortCountersExtended, 64, 1, "Multicast packets transmitted (PortCountersExtended).", EXT(multicast_xmit_pkts)},
      {"multicast_receive_packets", PmaAttr::kPortCountersExtended, 64, 1, "Multicast packets received (PortCountersExtended).", EXT(multicast_rcv_pkts)},
      {"receive_local_physical_errors", PmaAttr::kPortRcvErrorDetails, 16, 1, "Receive errors: local physical errors (PortRcvErrorDetails, 16-bit).", RE(local_physical_errors)},
      {"receive_malformed_packet_errors", PmaAttr::kPortRcvErrorDetails, 16, 1, "Receive errors: malformed packets (PortRcvErrorDetails, 16-bit).", RE(malformed_packet_errors)},
      {"receive_buffer_overrun_errors", PmaAttr::kPortRcvErrorDetails, 16, 1, "Receive errors: buffer overruns (PortRcvErrorDetails, 16-bit).", RE(buffer_overrun_errors)},
      {"receive_dlid_mapping_errors", PmaAttr::kPortRcvErrorDetails, 16, 1, "Receive errors: DLID mapping (PortRcvErrorDetails, 16-bit).", RE(dlid_mapping_errors)},
      {"receive_vl_mapping_errors", PmaAttr::kPortRcvErrorDetails, 16, 1, "Receive errors: VL mapping (PortRcvErrorDetails, 16-bit).", RE(vl_mapping_errors)},
      {"receive_looping_errors", PmaAttr::kPortRcvErrorDetails, 16, 1, "Receive errors: looping (PortRcvErrorDetails, 16-bit).", RE(looping_errors)},
      {"transmit_inactive_discards", PmaAttr::kPortXmitDiscardDetails, 16, 1, "Transmit discards: port inactive (PortXmitDiscardDetails, 16-bit).", XD(inactive_discards)},
      {"transmit_neighbor_mtu_discards", PmaAttr::kPortXmitDiscardDetails, 16, 1, "Transmit discards: neighbor MTU exceeded (PortXmitDiscardDetails, 16-bit).", XD(neighbor_mtu_discards)},
      {"transmit_sw_lifetime_limit_discards", PmaAttr::kPortXmitDiscardDetails, 16, 1, "Transmit discards: switch lifetime limit (PortXmitDiscardDetails, 16-bit).", XD(sw_lifetime_limit_discards)},
      {"transmit_sw_hoq_lifetime_limit_discards", PmaAttr::kPortXmitDiscardDetails, 16, 1, "Transmit discards: switch head-of-queue lifetime limit (PortXmitDiscardDetails, 16-bit).", XD(sw_hoq_lifetime_limit_discards)},
  };
  return d;
}

void emit(const std::string& prefix, const Def& d, unsigned width, std::uint64_t raw, const exporter::Labels& base,
          Saturation saturation, exporter::MetricSink& out) {
  // raw fits in 64 bits / 4 for every 64-bit data counter a real port reaches; guard anyway.
  const std::uint64_t v = (d.scale > 1 && raw > UINT64_MAX / d.scale) ? UINT64_MAX : raw * d.scale;
  out.counter(prefix + d.name + "_total", d.help, base, v);
  const bool saturated = width < 64 && raw >= ((std::uint64_t{1} << width) - 1);
  if (width < 64 && (saturated || saturation == Saturation::kEveryCounter)) {
    exporter::Labels l = base;
    l.emplace_back("counter", d.name);
    out.gauge(prefix + "saturated",
              "1 when a PMA counter narrower than 64 bits sits at its maximum and has stopped counting.", std::move(l),
              saturated ? 1.0 : 0.0);
  }
}

}  // namespace

bool says_unsupported(PmaAttr attr, const mad::PmaReply& reply) {
  return std::find(kOptionalAttrs.begin(), kOptionalAttrs.end(), attr) != kOptionalAttrs.end() &&
         reply.outcome == mad::Outcome::kStatus && mad::status_unsupported(reply.status);
}

std::vector<PmaAttr> attributes_for(std::uint16_t cap, bool vl_xmit_wait, AttrSet refused) {
  std::vector<PmaAttr> a{PmaAttr::kPortCounters};
  // PortCountersExtended only where ClassPortInfo announces it (perfquery asks anyway and warns).
  if (cap & (mad::kCapExtWidth | mad::kCapExtWidthNoIetf)) a.push_back(PmaAttr::kPortCountersExtended);
  a.push_back(PmaAttr::kPortRcvErrorDetails);
  a.push_back(PmaAttr::kPortXmitDiscardDetails);
  if (vl_xmit_wait) a.push_back(PmaAttr::kPortVLXmitWaitCounters);
  std::erase_if(a, [&](PmaAttr x) { return refused.has(x); });
  return a;
}

void emit_support(const std::string& name, std::string_view help, std::uint16_t cap, bool vl_xmit_wait,
                  AttrSet refused, const exporter::Labels& base, exporter::MetricSink& out) {
  const auto asked = attributes_for(cap, vl_xmit_wait, refused);
  for (PmaAttr a : kOptionalAttrs) {
    if (a == PmaAttr::kPortVLXmitWaitCounters && !vl_xmit_wait) continue;
    exporter::Labels l = base;
    l.emplace_back("attribute", std::string(mad::attr_name(a)));
    out.gauge_u64(name, help, std::move(l), std::find(asked.begin(), asked.end(), a) != asked.end() ? 1 : 0);
  }
}

bool store(PortReadings& r, PmaAttr attr, const mad::PmaReply& reply) {
  const auto p = reply.payload();
  switch (attr) {
    case PmaAttr::kClassPortInfo: {
      auto c = mad::decode_class_port_info(p);
      if (c) r.cap_mask = c->capability_mask;
      return c.has_value();
    }
    case PmaAttr::kPortCounters: return (r.pc = mad::decode_port_counters(p)).has_value();
    case PmaAttr::kPortCountersExtended: return (r.ext = mad::decode_port_counters_ext(p)).has_value();
    case PmaAttr::kPortRcvErrorDetails: return (r.rcv_err = mad::decode_rcv_error_details(p)).has_value();
    case PmaAttr::kPortXmitDiscardDetails: return (r.xmit_disc = mad::decode_xmit_discard_details(p)).has_value();
    case PmaAttr::kPortVLXmitWaitCounters: return (r.vl_wait = mad::decode_vl_xmit_wait(p)).has_value();
  }
  return false;
}

void emit_port(const PortReadings& r, const std::string& prefix, const exporter::Labels& base, exporter::MetricSink& out,
               Saturation saturation) {
  const bool full_ext = r.ext && (r.cap_mask & mad::kCapExtWidth);
  for (const Def& d : defs()) {
    const std::string name = d.name;
    if (name == "transmit_wait") {
      // Only valid when ClassPortInfo says so (perfquery's rule).
      if (r.pc && (r.cap_mask & mad::kCapXmitWait)) emit(prefix, d, 32, r.pc->xmit_wait, base, saturation, out);
      continue;
    }
    if (name == "transmit_bytes" || name == "receive_bytes" || name == "transmit_packets" || name == "receive_packets") {
      const bool tx = name[0] == 't';
      const bool bytes = name.ends_with("bytes");
      if (r.ext) {
        emit(prefix, d, 64, bytes ? (tx ? r.ext->xmit_data : r.ext->rcv_data) : (tx ? r.ext->xmit_pkts : r.ext->rcv_pkts),
             base, saturation, out);
      } else if (r.pc && !r.ext_failed) {
        emit(prefix, d, 32, bytes ? (tx ? r.pc->xmit_data : r.pc->rcv_data) : (tx ? r.pc->xmit_pkts : r.pc->rcv_pkts),
             base, saturation, out);
      }
      continue;
    }
    if (d.attr == PmaAttr::kPortCountersExtended && !full_ext) continue;  // NoIETF: no uni/multicast
    if (auto v = d.get(r)) emit(prefix, d, d.width, *v, base, saturation, out);
  }
  if (r.vl_wait) {
    for (std::size_t vl = 0; vl < r.vl_wait->vl.size(); ++vl) {
      exporter::Labels l = base;
      l.emplace_back("vl", std::to_string(vl));
      out.counter(prefix + "transmit_wait_vl_total",
                  "Per-VL PortVLXmitWait ticks (PortVLXmitWaitCounters, 16-bit each; only where the agent supports it).",
                  std::move(l), r.vl_wait->vl[vl]);
    }
  }
}

}  // namespace rdma::collectors::pma
