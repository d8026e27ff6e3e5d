// What the path tracer (path_tracer.h) computes without a socket: the RoCE v2 UDP source port of
// a flow from its GRH flow label (the kernel's rule), the flow labels the prober gives its flows,
// the trace packet's bytes, the reading of the kernel's error queue (IP_RECVERR) and the rate
// bound. Pure: no clock of its own, no sockets; fuzzed (tests/fuzz/fuzz_trace_packet.cpp).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rdma::collectors::prober {

// include/rdma/ib_verbs.h: rdma_flow_label_to_udp_sport(). rxe (rxe_modify_qp: rdma_get_udp_sport)
// and mlx5 take a QP's RoCE v2 UDP source port from its GRH flow label this way; a flow label of
// 0 is first replaced by rdma_calc_flow_label(local qpn, remote qpn).
inline constexpr std::uint16_t kRoceSportMin = 0xC000;
inline constexpr std::uint32_t kFlowLabelMask = 0xFFFFF;
inline constexpr std::uint16_t kRoceV2Port = 4791;
constexpr std::uint16_t flow_label_to_udp_sport(std::uint32_t fl) {
  const std::uint32_t low = fl & 0x3FFF, high = fl & 0xFC000;
  return static_cast<std::uint16_t>((low ^ (high >> 14)) | kRoceSportMin);
}
// rdma_calc_flow_label(): symmetric in the two QP numbers, so both ends of a connection compute
// the same label.
constexpr std::uint32_t calc_flow_label(std::uint32_t lqpn, std::uint32_t rqpn) {
  std::uint64_t v = static_cast<std::uint64_t>(lqpn) * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<std::uint32_t>(v & kFlowLabelMask);
}
// rdma_get_udp_sport(): the source port a QP with flow label `fl` sends from.
constexpr std::uint16_t qp_udp_sport(std::uint32_t fl, std::uint32_t lqpn, std::uint32_t rqpn) {
  return flow_label_to_udp_sport(fl ? fl : calc_flow_label(lqpn, rqpn));
}
// The nonzero flow label whose source port is 0xC000 + offset (offset < 0x4000). Offset 0 needs
// a high part (0x4001 -> 1 ^ 1 = 0): a label of 0 would mean "derive from the QP numbers".
constexpr std::uint32_t flow_label_for_offset(std::uint16_t offset) {
  return (offset & 0x3FFF) ? (offset & 0x3FFFu) : 0x4001u;
}

// The flow label of flow `flow` (of `flows`) of a link whose key hashes to `link_seed`, at its
// `rotation`-th re-creation. The 14-bit source port space is cut into `flows` equal slots: flow f
// always sends from slot f, so a link's flows are evenly spread over the hash input rather than
// by chance (two flows never share a port); inside its slot a flow starts at the link's own
// offset (links do not all start at the same ports) and each rotation moves it by an odd step of
// about 0.618 of the slot, coprime with its width, which visits every port of the slot before
// repeating.
std::uint32_t choose_flow_label(std::uint64_t link_seed, unsigned flow, unsigned flows, std::uint64_t rotation);
// A stable 64-bit hash of a link's key (FNV-1a), the link_seed above.
std::uint64_t link_seed(const std::string& key);

// The trace packet: a RoCE v2 BTH (12 bytes) and an ICRC (4), the UDP payload a RoCE v2 packet has,
// with the flow's destination QP (fabrics that hash on BTH fields, as Meta's E-ECMP on the
// destination QP, route it as the flow). It is built so that no NIC accepts it for a QP, should
// it ever reach the destination: the transport version is 0xF (IBA: only 0 is valid; rxe's
// hdr_check drops any other before looking the QP up), the opcode is a reserved RC one (0x1F),
// the P_Key 0x0000 (the invalid P_Key, member of no partition) and the ICRC is zero (wrong). The
// PSN field carries `seq` (the TTL of the packet), so an error queue answer names its hop.
inline constexpr std::size_t kTracePacketSize = 16;
inline constexpr std::uint8_t kTraceOpcode = 0x1F, kTraceTver = 0xF;
std::array<std::uint8_t, kTracePacketSize> build_trace_packet(std::uint32_t dest_qpn, std::uint32_t seq);
struct TracePacketFields {
  std::uint32_t dest_qpn = 0, seq = 0;
};
// The fields of a packet built by build_trace_packet (what the error queue hands back as the
// offending datagram's payload); nullopt for anything else.
std::optional<TracePacketFields> parse_trace_packet(std::span<const std::uint8_t> payload);

// One answer read from the error queue (recvmsg MSG_ERRQUEUE, IP_RECVERR / IPV6_RECVERR).
struct HopAnswer {
  enum class Kind : std::uint8_t { kTimeExceeded, kUnreachable, kOther };
  Kind kind = Kind::kOther;
  bool icmp = false;  // sent by a router or host (SO_EE_ORIGIN_ICMP / _ICMP6), not the local stack
  std::string from;  // numeric address of the router (or host) that sent the ICMP error, "" if none
  int error = 0;     // ee_errno
};
// Decodes the control messages of one MSG_ERRQUEUE recvmsg (the bytes of msg_control, up to
// msg_controllen): the IP_RECVERR / IPV6_RECVERR sock_extended_err and the offender address after
// it. nullopt when the buffer holds none (or a truncated one).
std::optional<HopAnswer> decode_error_queue(std::span<const std::uint8_t> control);

// Whether an ICMP answer is one of this trace's (docs/prober.md, "Answers are checked"). The
// kernel hands an error to the socket only when the quoted IP and UDP headers carry the socket's
// addresses and ports (its UDP socket lookup on the quoted 4-tuple: the source port is checked
// there), and hands back what the answer quotes past the UDP header: `quoted`. That must hold the
// trace packet's BTH, at least its first 12 bytes, equal to what this trace sent: opcode, TVer,
// P_Key 0, the flow's destination QP, and in the PSN a TTL the trace has sent (1..sent_ttl); what
// is quoted of the ICRC after it must be the zero sent; more bytes (RFC 4884's padding to 128 and
// its extensions, or a router quoting past the packet) are not looked at. A shorter quote (RFC
// 792's minimum, IP header + 8 bytes, ends at the UDP header: 0 bytes here) names no QP nor TTL,
// so it cannot tell this trace's answer from a forged one, nor which TTL it answers: ignored.
struct AnswerCheck {
  std::uint32_t ttl = 0;  // the TTL answered (the quoted PSN) when accepted
  // "" accepted; else why not (the `reason` of rdma_prober_trace_answers_ignored_total):
  // local (no ICMP: a local error), other_type (ICMP neither time exceeded nor unreachable),
  // short_quote (fewer than 12 bytes of BTH quoted), not_trace (the quote is no trace packet),
  // wrong_qpn (another flow's destination QP), wrong_psn (a TTL this trace did not send).
  const char* reason = "";
};
inline constexpr std::size_t kMinQuotedBth = 12;
AnswerCheck check_answer(const HopAnswer& a, std::span<const std::uint8_t> quoted, std::uint32_t dest_qpn, std::uint32_t sent_ttl);

// A token bucket (rate per second, burst): a few packets per second per link, as switches answer
// TTL-expired packets from a rate-limited CPU path.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double rate_per_second, double burst) : rate_(rate_per_second), burst_(burst), tokens_(burst) {}
  bool take(Clock::time_point now);
  // When take() succeeds next (now when it would now).
  Clock::time_point next(Clock::time_point now) const;

 private:
  void refill(Clock::time_point now);
  double rate_, burst_, tokens_;
  Clock::time_point at_{};
  bool started_ = false;
};

// The hop list of a trace from its answers by TTL (answers[i] = TTL i+1; "" = no answer; the
// destination's address last when it answered): unanswered hops become "*", trailing unanswered
// hops are cut. Only what this trace read: no distance learned earlier adds a hop.
std::vector<std::string> hop_list(const std::vector<std::string>& answers);

}  // namespace rdma::collectors::prober
