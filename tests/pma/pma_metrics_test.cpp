// The pma collector's rules for optional attributes, without a simulator: which MAD answers count
// as "unsupported", what is asked of a port that refused some, the state series, and where the
// data counters come from when PortCountersExtended is refused or fails.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "collectors/pma/pma_metrics.h"
#include "tests/lib/samples.h"

using namespace rdma;
using collectors::pma::AttrSet;
using mad::PmaAttr;

namespace {

mad::PmaReply status_reply(std::uint16_t status) {
  mad::PmaReply r;
  r.outcome = mad::Outcome::kStatus;
  r.status = status;
  return r;
}

// name{labels} -> value for the u64 samples of a sink.
std::map<std::string, std::uint64_t> samples(const exporter::MetricSink& sink) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& f : sink.families())
    for (const auto& s : f.samples) {
      std::string key(f.name);
      for (const auto& [k, v] : s.labels) key += "," + k + "=" + v;
      if (const auto* v = std::get_if<std::uint64_t>(&s.value)) out[key] = *v;
    }
  return out;
}

constexpr std::uint16_t kCapCa = mad::kCapExtWidth | mad::kCapXmitWait;  // 0x1200, an ibsim CA

}  // namespace

TEST_CASE("an unsupported method or attribute status of an optional attribute is a refusal") {
  using collectors::pma::says_unsupported;
  for (PmaAttr a : collectors::pma::kOptionalAttrs) {
    CHECK(says_unsupported(a, status_reply(0x000C)));  // method/attribute combination not supported
    CHECK(says_unsupported(a, status_reply(0x0008)));  // method not supported
    CHECK(!says_unsupported(a, status_reply(0x001C)));  // invalid attribute value: a failure
    CHECK(!says_unsupported(a, status_reply(0x0001)));  // busy
    mad::PmaReply timeout;
    CHECK(!says_unsupported(a, timeout));
  }
  // Mandatory attributes refused are failures.
  CHECK(!says_unsupported(PmaAttr::kPortCounters, status_reply(0x000C)));
  CHECK(!says_unsupported(PmaAttr::kClassPortInfo, status_reply(0x000C)));
}

TEST_CASE("attributes_for leaves out what the capability mask rules out and what the port refused") {
  using collectors::pma::attributes_for;
  auto has = [](const std::vector<PmaAttr>& v, PmaAttr a) { return std::find(v.begin(), v.end(), a) != v.end(); };
  auto all = attributes_for(kCapCa, true);
  CHECK(all.size() == 5);
  CHECK(!has(attributes_for(mad::kCapXmitWait, true), PmaAttr::kPortCountersExtended));
  CHECK(has(attributes_for(mad::kCapExtWidthNoIetf, false), PmaAttr::kPortCountersExtended));
  CHECK(!has(attributes_for(kCapCa, false), PmaAttr::kPortVLXmitWaitCounters));
  AttrSet refused;
  refused.add(PmaAttr::kPortRcvErrorDetails);
  refused.add(PmaAttr::kPortCountersExtended);
  const auto some = attributes_for(kCapCa, true, refused);
  CHECK(some == std::vector<PmaAttr>{PmaAttr::kPortCounters, PmaAttr::kPortXmitDiscardDetails,
                                     PmaAttr::kPortVLXmitWaitCounters});
}

TEST_CASE("emit_support: 1 asked, 0 refused or ruled out, nothing for per-VL wait when not wanted") {
  AttrSet refused;
  refused.add(PmaAttr::kPortXmitDiscardDetails);
  exporter::MetricSink sink;
  collectors::pma::emit_support("s", "help", mad::kCapXmitWait, false, refused, {{"device", "d"}}, sink);
  const auto m = samples(sink);
  CHECK(m.size() == 3);
  CHECK(m.at("s,device=d,attribute=PortCountersExtended") == 0);  // no ExtendedWidth bit
  CHECK(m.at("s,device=d,attribute=PortRcvErrorDetails") == 1);
  CHECK(m.at("s,device=d,attribute=PortXmitDiscardDetails") == 0);
  exporter::MetricSink with_vl;
  collectors::pma::emit_support("s", "help", kCapCa, true, {}, {}, with_vl);
  CHECK(samples(with_vl).at("s,attribute=PortVLXmitWaitCounters") == 1);
}

TEST_CASE("data counters: extended when answered, 32-bit when refused, absent when it failed") {
  collectors::pma::PortReadings r;
  r.cap_mask = kCapCa;
  r.pc = mad::PortCounters{};
  r.pc->xmit_data = 1000;  // words
  auto bytes = [&r] {
    exporter::MetricSink sink;
    collectors::pma::emit_port(r, "p_", {}, sink);
    const auto m = samples(sink);
    auto it = m.find("p_transmit_bytes_total");
    return it == m.end() ? -1 : static_cast<long long>(it->second);
  };
  CHECK(bytes() == 4000);  // refused (or not announced): PortCounters
  r.ext_failed = true;
  CHECK(bytes() == -1);  // failed this scrape: no fall back to a smaller 32-bit value
  r.ext_failed = false;
  r.ext = mad::PortCountersExtended{};
  r.ext->xmit_data = 1000000000000ull;
  CHECK(bytes() == 4000000000000ll);
}

TEST_CASE("saturation flags: one per narrow counter, or only those at their maximum") {
  collectors::pma::PortReadings r;
  r.cap_mask = kCapCa;
  r.pc = mad::PortCounters{};
  r.pc->symbol_errors = 0xffff;  // 16-bit, stuck
  r.pc->link_downed = 3;
  auto flags = [&r](collectors::pma::Saturation s) {
    exporter::MetricSink sink;
    collectors::pma::emit_port(r, "p_", {}, sink, s);
    std::map<std::string, double> out;
    if (const auto* f = rdma::testing::family(sink, "p_saturated"))
      for (const auto& x : f->samples) out[x.labels.back().second] = std::get<double>(x.value);
    return out;
  };
  const auto every = flags(collectors::pma::Saturation::kEveryCounter);
  // 13 narrow PortCounters fields, PortXmitWait, and the 4 data/packet counters taken from the
  // 32-bit PortCounters (no PortCountersExtended here)
  CHECK(every.size() == 18);
  CHECK(every.at("symbol_errors") == 1.0);
  CHECK(every.at("link_downed") == 0.0);
  const auto set = flags(collectors::pma::Saturation::kOnlySaturated);
  CHECK(set == std::map<std::string, double>{{"symbol_errors", 1.0}});
}
