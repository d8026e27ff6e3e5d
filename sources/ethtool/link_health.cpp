#include "sources/ethtool/link_health.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <array>

#include "sources/netlink/genetlink.h"

namespace rdma::ethtool {
namespace {

using netlink::Bytes;

template <class T>
std::optional<T> exact(Bytes v) {
  T value{};
  if (v.size() != sizeof value || !netlink::read_value(v, value)) return std::nullopt;
  return value;
}

// An array of u64 (nla_put_64bit of `cnt` values); nullopt when the length is not a multiple of 8
// or holds more than `max` values.
std::optional<std::vector<std::uint64_t>> u64_array(Bytes v, std::size_t max) {
  if (v.size() % 8 != 0 || v.size() / 8 > max) return std::nullopt;
  std::vector<std::uint64_t> out(v.size() / 8);
  for (std::size_t i = 0; i < out.size(); ++i) netlink::read_value(v.subspan(i * 8), out[i]);
  return out;
}

// NLA_UINT (nla_put_uint): 4 or 8 bytes.
std::optional<std::uint64_t> any_uint(Bytes v) {
  if (auto a = exact<std::uint32_t>(v)) return *a;
  return exact<std::uint64_t>(v);
}

bool decode_counter(Bytes v, FecCounter& out) {
  auto values = u64_array(v, 1 + kMaxLanes);
  if (!values) return false;
  if (values->empty()) return true;  // cnt 0: the driver does not count it
  out.total = values->front();
  out.lanes.assign(values->begin() + 1, values->end());
  return true;
}

bool decode_hist_bin(Bytes v, FecHistogramBin& bin) {
  bool low = false, high = false, ok = true;
  ok &= netlink::for_each_attr(v, [&](std::uint16_t type, Bytes a) {
    switch (type) {
      case kFecHistBinLow: if (auto x = exact<std::uint32_t>(a)) bin.low = *x, low = true; else ok = false; break;
      case kFecHistBinHigh: if (auto x = exact<std::uint32_t>(a)) bin.high = *x, high = true; else ok = false; break;
      case kFecHistBinValue: if (!(bin.codewords = any_uint(a))) ok = false; break;
      case kFecHistBinValuePerLane:
        if (auto lanes = u64_array(a, kMaxLanes)) bin.lanes = std::move(*lanes);
        else ok = false;
        break;
      default: break;  // ETHTOOL_A_FEC_HIST_PAD
    }
  });
  return ok && low && high && bin.low <= bin.high;
}

// Mirrors of include/uapi/linux/ethtool.h: index = enum value.
constexpr std::array<std::string_view, 11> kExtStates{
    "autoneg",          "link_training_failure", "link_logical_mismatch", "bad_signal_integrity",
    "no_cable",         "cable_issue",           "eeprom_issue",          "calibration_failure",
    "power_budget_exceeded", "overheat",         "module"};
// Substates start at 1; one table per state that has them.
constexpr std::array<std::string_view, 6> kAutonegSub{
    "no_partner_detected", "ack_not_received", "next_page_exchange_failed", "no_partner_detected_force_mode",
    "fec_mismatch_during_override", "no_hcd"};
constexpr std::array<std::string_view, 4> kLinkTrainingSub{
    "kr_frame_lock_not_acquired", "kr_link_inhibit_timeout", "kr_link_partner_did_not_set_receiver_ready",
    "remote_fault"};
constexpr std::array<std::string_view, 5> kLogicalMismatchSub{
    "pcs_did_not_acquire_block_lock", "pcs_did_not_acquire_am_lock", "pcs_did_not_get_align_status",
    "fc_fec_is_not_locked", "rs_fec_is_not_locked"};
constexpr std::array<std::string_view, 4> kSignalIntegritySub{
    "large_number_of_physical_errors", "unsupported_rate", "serdes_reference_clock_lost", "serdes_alos"};
constexpr std::array<std::string_view, 2> kCableSub{"unsupported_cable", "cable_test_failure"};
constexpr std::array<std::string_view, 1> kModuleSub{"cmis_not_ready"};

std::span<const std::string_view> substates_of(std::uint8_t state) {
  switch (state) {
    case ETHTOOL_LINK_EXT_STATE_AUTONEG: return kAutonegSub;
    case ETHTOOL_LINK_EXT_STATE_LINK_TRAINING_FAILURE: return kLinkTrainingSub;
    case ETHTOOL_LINK_EXT_STATE_LINK_LOGICAL_MISMATCH: return kLogicalMismatchSub;
    case ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY: return kSignalIntegritySub;
    case ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE: return kCableSub;
    case ETHTOOL_LINK_EXT_STATE_MODULE: return kModuleSub;
    default: return {};
  }
}

std::vector<std::uint8_t> build_get(std::uint16_t family_id, std::uint8_t cmd, std::uint16_t header_attr,
                                    const std::string& ifname, std::uint32_t flags) {
  return netlink::build_genl_request(family_id, cmd, ETHTOOL_GENL_VERSION, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, header_attr);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    if (flags) mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_FLAGS, flags);
    mnl_attr_nest_end(nlh, hdr);
  });
}

}  // namespace

Result<LinkState> decode_linkstate_reply(std::span<const std::uint8_t> msg) {
  using R = Result<LinkState>;
  auto reply = netlink::single_reply(msg);
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  LinkState out;
  bool attrs_ok = true;
  const bool ok = netlink::for_each_attr(reply.value, sizeof(genlmsghdr), [&](std::uint16_t type, Bytes v) {
    switch (type) {
      case ETHTOOL_A_LINKSTATE_LINK:
        if (auto b = exact<std::uint8_t>(v)) out.link = *b != 0; else attrs_ok = false;
        break;
      case ETHTOOL_A_LINKSTATE_SQI: if (!(out.sqi = exact<std::uint32_t>(v))) attrs_ok = false; break;
      case ETHTOOL_A_LINKSTATE_SQI_MAX: if (!(out.sqi_max = exact<std::uint32_t>(v))) attrs_ok = false; break;
      case ETHTOOL_A_LINKSTATE_EXT_STATE: if (!(out.ext_state = exact<std::uint8_t>(v))) attrs_ok = false; break;
      case ETHTOOL_A_LINKSTATE_EXT_SUBSTATE: if (!(out.ext_substate = exact<std::uint8_t>(v))) attrs_ok = false; break;
      case kLinkStateExtDownCount: if (!(out.down_count = exact<std::uint32_t>(v))) attrs_ok = false; break;
      default: break;  // the header nest, and attributes of later kernels
    }
  });
  if (!ok || !attrs_ok) return R::failure(ReadError::kMalformed);
  return R::success(out);
}

Result<FecState> decode_fec_reply(std::span<const std::uint8_t> msg) {
  using R = Result<FecState>;
  auto reply = netlink::single_reply(msg);
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  FecState out;
  bool attrs_ok = true;
  auto stats = [&](Bytes nest) {
    return netlink::for_each_attr(nest, [&](std::uint16_t stat, Bytes v) {
      switch (stat) {
        case ETHTOOL_A_FEC_STAT_CORRECTED: attrs_ok &= decode_counter(v, out.corrected_blocks); break;
        case ETHTOOL_A_FEC_STAT_UNCORR: attrs_ok &= decode_counter(v, out.uncorrectable_blocks); break;
        case ETHTOOL_A_FEC_STAT_CORR_BITS: attrs_ok &= decode_counter(v, out.corrected_bits); break;
        case kFecStatHist: {
          if (out.histogram.size() >= kMaxHistogramBins) { attrs_ok = false; break; }
          FecHistogramBin bin;
          attrs_ok &= decode_hist_bin(v, bin);
          out.histogram.push_back(std::move(bin));
          break;
        }
        default: break;  // ETHTOOL_A_FEC_STAT_PAD
      }
    });
  };
  const bool ok = netlink::for_each_attr(reply.value, sizeof(genlmsghdr), [&](std::uint16_t type, Bytes v) {
    switch (type) {
      case ETHTOOL_A_FEC_ACTIVE: if (!(out.active_mode_bit = exact<std::uint32_t>(v))) attrs_ok = false; break;
      case ETHTOOL_A_FEC_AUTO:
        if (auto b = exact<std::uint8_t>(v)) out.automatic = *b != 0; else attrs_ok = false;
        break;
      case ETHTOOL_A_FEC_STATS: attrs_ok &= stats(v); break;
      default: break;  // header, the configured modes' bitset
    }
  });
  if (!ok || !attrs_ok) return R::failure(ReadError::kMalformed);
  return R::success(std::move(out));
}

std::string ext_state_label(std::uint8_t state) {
  if (state < kExtStates.size()) return std::string(kExtStates[state]);
  return "state_" + std::to_string(state);
}

std::string ext_substate_label(std::uint8_t state, std::uint8_t substate) {
  if (substate == 0) return "";
  const auto names = substates_of(state);
  if (substate <= names.size()) return std::string(names[substate - 1u]);
  return "substate_" + std::to_string(substate);
}

std::string fec_mode_label(std::uint32_t bit) {
  switch (bit) {
    case ETHTOOL_LINK_MODE_FEC_NONE_BIT: return "none";
    case ETHTOOL_LINK_MODE_FEC_RS_BIT: return "rs";
    case ETHTOOL_LINK_MODE_FEC_BASER_BIT: return "baser";
    case ETHTOOL_LINK_MODE_FEC_LLRS_BIT: return "llrs";
    default: return "bit_" + std::to_string(bit);
  }
}

std::vector<std::uint8_t> build_linkstate_get(std::uint16_t family_id, const std::string& ifname, bool stats) {
  return build_get(family_id, ETHTOOL_MSG_LINKSTATE_GET, ETHTOOL_A_LINKSTATE_HEADER, ifname, stats ? ETHTOOL_FLAG_STATS : 0);
}

std::vector<std::uint8_t> build_fec_get(std::uint16_t family_id, const std::string& ifname) {
  return build_get(family_id, ETHTOOL_MSG_FEC_GET, ETHTOOL_A_FEC_HEADER, ifname, ETHTOOL_FLAG_STATS);
}

Result<LinkState> LinkHealthReader::linkstate(const std::string& ifname) {
  auto reply = client_.request([&](std::uint16_t f) { return build_linkstate_get(f, ifname, linkstate_stats_); });
  if (!reply && reply.error == ReadError::kInvalid && linkstate_stats_) {
    // A kernel whose linkstate header policy has no ETHTOOL_FLAG_STATS (no down count) refuses
    // the flag with EINVAL: ask without it from now on.
    linkstate_stats_ = false;
    reply = client_.request([&](std::uint16_t f) { return build_linkstate_get(f, ifname, false); });
  }
  if (!reply) return Result<LinkState>::failure(reply.error, reply.sys_errno);
  return decode_linkstate_reply(reply.value);
}

Result<FecState> LinkHealthReader::fec(const std::string& ifname) {
  auto reply = client_.request([&](std::uint16_t f) { return build_fec_get(f, ifname); });
  if (!reply) return Result<FecState>::failure(reply.error, reply.sys_errno);
  return decode_fec_reply(reply.value);
}

}  // namespace rdma::ethtool
