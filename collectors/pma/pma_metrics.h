// The PMA counter table shared by local mode (rdma_pma_port_*) and fabric mode
// (rdma_pma_fabric_port_*): one row per exported counter, its attribute, width and scale.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exporter/metrics.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/pma_decode.h"

namespace rdma::collectors::pma {

// What one port answered; absent attributes were unsupported or failed.
struct PortReadings {
  std::uint16_t cap_mask = 0;
  std::optional<mad::PortCounters> pc;
  std::optional<mad::PortCountersExtended> ext;
  std::optional<mad::PortRcvErrorDetails> rcv_err;
  std::optional<mad::PortXmitDiscardDetails> xmit_disc;
  std::optional<mad::PortVLXmitWait> vl_wait;
};

// The attributes to ask a port for, given its ClassPortInfo capability mask.
std::vector<mad::PmaAttr> attributes_for(std::uint16_t cap_mask, bool vl_xmit_wait);
// Stores a successful reply's payload; false when it does not decode (malformed).
bool store(PortReadings& r, mad::PmaAttr attr, const mad::PmaReply& reply);

// Writes every counter of `r` as <prefix><name>_total with `base` labels, plus
// <prefix>counter_saturated{counter} for the counters narrower than 64 bits.
void emit_port(const PortReadings& r, const std::string& prefix, const exporter::Labels& base, exporter::MetricSink& out);

// The names emit_port writes after the prefix (for the docs test).
std::vector<std::string> counter_names();

}  // namespace rdma::collectors::pma
