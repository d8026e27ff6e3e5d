#include "collectors/pma/pma_metrics.h"

#include <algorithm>
#include <cstdint>

#include "collectors/common/pma_names.h"

namespace rdma::collectors::pma {
namespace {

using mad::PmaAttr;

void emit(const std::string& prefix, const mad::PmaCounter& c, mad::PmaValue v, const exporter::Labels& base,
          Saturation saturation, exporter::MetricSink& out) {
  // raw fits in 64 bits / 4 for every 64-bit data counter a real port reaches; guard anyway.
  const std::uint64_t scaled = (c.scale > 1 && v.raw > UINT64_MAX / c.scale) ? UINT64_MAX : v.raw * c.scale;
  const PmaCounterName& name = pma_counter_name(c.id);
  out.counter(prefix + std::string(name.suffix) + "_total", name.help, base, scaled);
  const bool saturated = mad::saturated(v);
  if (v.width < 64 && (saturated || saturation == Saturation::kEveryCounter)) {
    exporter::Labels l = base;
    l.emplace_back("counter", std::string(name.suffix));
    out.gauge(prefix + "saturated",
              "1 when a PMA counter narrower than 64 bits sits at its maximum and has stopped counting.", std::move(l),
              saturated ? 1.0 : 0.0);
  }
}

}  // namespace

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

void emit_port(const PortReadings& r, const std::string& prefix, const exporter::Labels& base, exporter::MetricSink& out,
               Saturation saturation) {
  for (const mad::PmaCounter& c : mad::pma_counters())
    if (auto v = mad::pma_value(c, r)) emit(prefix, c, *v, base, saturation, out);
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
