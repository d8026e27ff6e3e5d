// How local mode (rdma_pma_port_*) and fabric mode (rdma_pma_fabric_port_*) ask for and write
// the PMA counters of sources/mad/pma_counters.h.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/metrics.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/pma_agent.h"
#include "sources/mad/pma_counters.h"
#include "sources/mad/pma_decode.h"

namespace rdma::collectors::pma {

// The optional attributes, the refused-attribute set and the "unsupported" rule belong to the
// PMA agent reader (sources/mad/pma_agent.h).
using mad::AttrSet;
using mad::kOptionalAttrs;
using mad::says_unsupported;

// What one port answered (the decoders and the counter table are in sources/mad/pma_counters.h).
using mad::PortReadings;
using mad::store;

// The attributes to ask a port for, given its ClassPortInfo capability mask, whether per-VL wait
// is wanted, and what the port's agent has refused.
std::vector<mad::PmaAttr> attributes_for(std::uint16_t cap_mask, bool vl_xmit_wait, AttrSet refused = {});

// Writes `name`{base..., attribute} for each optional attribute: 1 while it is asked and not
// refused, 0 when the capability mask rules it out or the agent refused it. PortVLXmitWaitCounters
// only when wanted (`vl_xmit_wait`): otherwise nothing is known of it.
void emit_support(const std::string& name, std::string_view help, std::uint16_t cap_mask, bool vl_xmit_wait,
                  AttrSet refused, const exporter::Labels& base, exporter::MetricSink& out);
// Which <prefix>saturated{counter} gauges emit_port writes: one per counter narrower than 64 bits
// (0 or 1), or only those at 1 (an on-demand fabric target: 14 zeros per port would be most of
// its exposition; "absent" reads as "not saturated" in `== 1` alerts).
enum class Saturation { kEveryCounter, kOnlySaturated };

// Writes every counter of `r` as <prefix><name>_total with `base` labels, plus
// <prefix>saturated{counter} for the counters narrower than 64 bits (see Saturation).
void emit_port(const PortReadings& r, const std::string& prefix, const exporter::Labels& base, exporter::MetricSink& out,
               Saturation saturation = Saturation::kEveryCounter);

}  // namespace rdma::collectors::pma
