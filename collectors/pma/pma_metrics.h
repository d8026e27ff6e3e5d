// The PMA counter table shared by local mode (rdma_pma_port_*) and fabric mode
// (rdma_pma_fabric_port_*): one row per exported counter, its attribute, width and scale.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "exporter/metrics.h"
#include "sources/mad/mad_client.h"
#include "sources/mad/pma_decode.h"

namespace rdma::collectors::pma {

// The optional PerfMgt attributes this collector reads (IBA vol1 16.1.3: of these only
// PortCounters is mandatory, besides ClassPortInfo). A real agent may answer one of them with an
// "unsupported" MAD status; that is a property of the port, learned per port and exported as
// state, never counted as an error.
inline constexpr std::array<mad::PmaAttr, 4> kOptionalAttrs = {
    mad::PmaAttr::kPortCountersExtended, mad::PmaAttr::kPortRcvErrorDetails, mad::PmaAttr::kPortXmitDiscardDetails,
    mad::PmaAttr::kPortVLXmitWaitCounters};

// The attributes a port's agent refused, as a bit per attribute ID (every ID here is below 32).
class AttrSet {
 public:
  bool has(mad::PmaAttr a) const { return bits_ & bit(a); }
  void add(mad::PmaAttr a) { bits_ |= bit(a); }
  void add(const AttrSet& other) { bits_ |= other.bits_; }

 private:
  static constexpr std::uint32_t bit(mad::PmaAttr a) { return std::uint32_t{1} << (static_cast<unsigned>(a) & 31u); }
  std::uint32_t bits_ = 0;
};

// True when `reply` to `attr` says the agent does not implement it (optional attributes only: a
// refused PortCounters or ClassPortInfo is a failure).
bool says_unsupported(mad::PmaAttr attr, const mad::PmaReply& reply);

// What one port answered; absent attributes were unsupported or failed.
struct PortReadings {
  std::uint16_t cap_mask = 0;
  // PortCountersExtended failed (not refused): the data/packet counters are left out rather than
  // taken from the 32-bit PortCounters (a jump down that Prometheus would read as a counter reset).
  bool ext_failed = false;
  std::optional<mad::PortCounters> pc;
  std::optional<mad::PortCountersExtended> ext;
  std::optional<mad::PortRcvErrorDetails> rcv_err;
  std::optional<mad::PortXmitDiscardDetails> xmit_disc;
  std::optional<mad::PortVLXmitWait> vl_wait;
};

// The attributes to ask a port for, given its ClassPortInfo capability mask, whether per-VL wait
// is wanted, and what the port's agent has refused.
std::vector<mad::PmaAttr> attributes_for(std::uint16_t cap_mask, bool vl_xmit_wait, AttrSet refused = {});

// Writes `name`{base..., attribute} for each optional attribute: 1 while it is asked and not
// refused, 0 when the capability mask rules it out or the agent refused it. PortVLXmitWaitCounters
// only when wanted (`vl_xmit_wait`): otherwise nothing is known of it.
void emit_support(const std::string& name, std::string_view help, std::uint16_t cap_mask, bool vl_xmit_wait,
                  AttrSet refused, const exporter::Labels& base, exporter::MetricSink& out);
// Stores a successful reply's payload; false when it does not decode (malformed).
bool store(PortReadings& r, mad::PmaAttr attr, const mad::PmaReply& reply);

// Which <prefix>saturated{counter} gauges emit_port writes: one per counter narrower than 64 bits
// (0 or 1), or only those at 1 (an on-demand fabric target: 14 zeros per port would be most of
// its exposition; "absent" reads as "not saturated" in `== 1` alerts).
enum class Saturation { kEveryCounter, kOnlySaturated };

// Writes every counter of `r` as <prefix><name>_total with `base` labels, plus
// <prefix>saturated{counter} for the counters narrower than 64 bits (see Saturation).
void emit_port(const PortReadings& r, const std::string& prefix, const exporter::Labels& base, exporter::MetricSink& out,
               Saturation saturation = Saturation::kEveryCounter);

}  // namespace rdma::collectors::pma
