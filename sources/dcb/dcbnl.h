// IEEE 802.1Qaz DCB configuration of a netdev through dcbnl (rtnetlink RTM_GETDCB,
// DCB_CMD_IEEE_GET): PFC enabled priorities and the PFC request/indication counters, ETS, the
// APP table (DSCP trust shows as DSCP entries) and the DCBX mode. The decoder is a pure function
// on the reply's bytes.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sources/common/result.h"
#include "sources/netlink/socket.h"

namespace rdma::dcb {

inline constexpr int kPriorities = 8;  // IEEE_8021QAZ_MAX_TCS

struct Pfc {
  std::uint8_t capability = 0;    // pfc_cap: traffic classes that can do PFC
  std::uint8_t enabled_mask = 0;  // pfc_en: bit p = PFC on priority p
  std::uint16_t delay = 0;        // bit times
  std::array<std::uint64_t, kPriorities> requests{};     // PFC frames sent, per priority
  std::array<std::uint64_t, kPriorities> indications{};  // PFC frames received, per priority
  bool enabled(int prio) const { return (enabled_mask >> prio) & 1; }
};

struct Ets {
  std::uint8_t willing = 0;
  std::uint8_t capability = 0;  // ets_cap
  std::array<std::uint8_t, kPriorities> tc_tx_bandwidth{};  // percent per TC
  std::array<std::uint8_t, kPriorities> tc_tsa{};           // 0 strict, 1 CBS, 2 ETS, 255 vendor
  std::array<std::uint8_t, kPriorities> priority_tc{};      // priority -> TC
};

struct App {
  std::uint8_t selector = 0;  // 1 ethertype, 2 TCP/SCTP port, 3 UDP/DCCP port, 4 any port, 5 DSCP
  std::uint8_t priority = 0;
  std::uint16_t protocol = 0;
};

struct IeeeConfig {
  std::optional<Pfc> pfc;
  std::optional<Ets> ets;
  std::vector<App> apps;
  std::optional<std::uint8_t> dcbx;  // DCB_CAP_DCBX_* bits
  // "dscp" when the APP table maps DSCP values (trust dscp), else "pcp".
  std::string_view trust() const;
};

// Pure: decodes one RTM_GETDCB/DCB_CMD_IEEE_GET reply (nlmsghdr + dcbmsg + attributes).
// Malformed input (short structs, overrunning attributes, other commands) is kMalformed; an
// NLMSG_ERROR is its errno (EOPNOTSUPP -> kNotSupported for netdevs without dcbnl_ops).
Result<IeeeConfig> decode_ieee_reply(std::span<const std::uint8_t> msg);
std::vector<std::uint8_t> build_ieee_get(const std::string& ifname);
std::string_view selector_label(std::uint8_t selector);  // "ethertype", "tcp", "udp", "port", "dscp"
std::string_view tsa_label(std::uint8_t tsa);            // "strict", "cbs", "ets", "vendor", "unknown"

class Reader {
 public:
  explicit Reader(std::chrono::milliseconds receive_timeout);
  Result<IeeeConfig> read(const std::string& ifname);

 private:
  netlink::Socket sock_;
};

}  // namespace rdma::dcb
