#include "collectors/prober/wire/trace_packet.h"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <netinet/icmp6.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace rdma::collectors::prober {

std::uint64_t link_seed(const std::string& key) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::uint32_t choose_flow_label(std::uint64_t seed, unsigned flow, unsigned flows, std::uint64_t rotation) {
  constexpr std::uint32_t kSpace = 0x4000;
  flows = std::clamp(flows, 1u, kSpace);
  flow %= flows;
  const std::uint32_t width = kSpace / flows;
  // Odd step near 0.618 of the slot, the first one coprime with the width: then `width`
  // rotations visit every port of the slot once. Any odd step is for power-of-two widths; other
  // widths (flows 5, 6, 9, 12, 14, 15) would repeat after width / gcd rotations.
  std::uint32_t step = 0;
  if (width > 1) {
    step = (static_cast<std::uint32_t>(width * 0.6180339887) | 1u) % width;
    while (std::gcd(step, width) != 1) step = (step + 2) % width;
  }
  const std::uint64_t start = seed % width;
  const std::uint32_t inside = width > 1 ? static_cast<std::uint32_t>((start + (rotation % width) * step) % width) : 0;
  return flow_label_for_offset(static_cast<std::uint16_t>(flow * width + inside));
}

std::array<std::uint8_t, kTracePacketSize> build_trace_packet(std::uint32_t dest_qpn, std::uint32_t seq) {
  std::array<std::uint8_t, kTracePacketSize> p{};
  p[0] = kTraceOpcode;
  p[1] = kTraceTver;  // SE 0, MigReq 0, PadCnt 0, TVer 0xF
  p[2] = p[3] = 0;    // P_Key 0x0000
  p[4] = 0;           // FECN, BECN, reserved
  p[5] = static_cast<std::uint8_t>(dest_qpn >> 16), p[6] = static_cast<std::uint8_t>(dest_qpn >> 8),
  p[7] = static_cast<std::uint8_t>(dest_qpn);
  p[8] = 0;  // AckReq 0, reserved
  p[9] = static_cast<std::uint8_t>(seq >> 16), p[10] = static_cast<std::uint8_t>(seq >> 8), p[11] = static_cast<std::uint8_t>(seq);
  // p[12..15]: ICRC 0
  return p;
}

std::optional<TracePacketFields> parse_trace_packet(std::span<const std::uint8_t> p) {
  if (p.size() != kTracePacketSize || p[0] != kTraceOpcode || p[1] != kTraceTver || p[2] || p[3]) return std::nullopt;
  TracePacketFields f;
  f.dest_qpn = (std::uint32_t{p[5]} << 16) | (std::uint32_t{p[6]} << 8) | p[7];
  f.seq = (std::uint32_t{p[9]} << 16) | (std::uint32_t{p[10]} << 8) | p[11];
  return f;
}

namespace {

HopAnswer::Kind classify(const sock_extended_err& e) {
  if (e.ee_origin == SO_EE_ORIGIN_ICMP) {
    if (e.ee_type == ICMP_TIME_EXCEEDED) return HopAnswer::Kind::kTimeExceeded;
    if (e.ee_type == ICMP_DEST_UNREACH) return HopAnswer::Kind::kUnreachable;
  } else if (e.ee_origin == SO_EE_ORIGIN_ICMP6) {
    if (e.ee_type == ICMP6_TIME_EXCEEDED) return HopAnswer::Kind::kTimeExceeded;
    if (e.ee_type == ICMP6_DST_UNREACH) return HopAnswer::Kind::kUnreachable;
  }
  return HopAnswer::Kind::kOther;
}

std::string offender(const std::uint8_t* at, std::size_t avail) {
  // SO_EE_OFFENDER: the sockaddr right after the sock_extended_err.
  char text[INET6_ADDRSTRLEN] = {};
  sa_family_t family = 0;
  if (avail < sizeof(family)) return "";
  std::memcpy(&family, at, sizeof(family));
  if (family == AF_INET && avail >= sizeof(sockaddr_in)) {
    sockaddr_in a;
    std::memcpy(&a, at, sizeof(a));
    if (inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text))) return text;
  } else if (family == AF_INET6 && avail >= sizeof(sockaddr_in6)) {
    sockaddr_in6 a;
    std::memcpy(&a, at, sizeof(a));
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {
      if (inet_ntop(AF_INET, a.sin6_addr.s6_addr + 12, text, sizeof(text))) return text;
    } else if (inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof(text))) {
      return text;
    }
  }
  return "";
}

}  // namespace

std::optional<HopAnswer> decode_error_queue(std::span<const std::uint8_t> control) {
  // Walked by hand with bounds checks (the kernel's layout: cmsghdr, aligned data), not with
  // CMSG_NXTHDR over a buffer of unknown origin.
  std::size_t off = 0;
  while (off + sizeof(cmsghdr) <= control.size()) {
    cmsghdr h;
    std::memcpy(&h, control.data() + off, sizeof(h));
    if (h.cmsg_len < CMSG_LEN(0) || h.cmsg_len > control.size() - off) return std::nullopt;
    const std::size_t data = off + CMSG_LEN(0), len = h.cmsg_len - CMSG_LEN(0);
    const bool recverr = (h.cmsg_level == SOL_IP && h.cmsg_type == IP_RECVERR) ||
                         (h.cmsg_level == SOL_IPV6 && h.cmsg_type == IPV6_RECVERR);
    if (recverr && len >= sizeof(sock_extended_err)) {
      sock_extended_err e;
      std::memcpy(&e, control.data() + data, sizeof(e));
      HopAnswer a;
      a.kind = classify(e);
      a.icmp = e.ee_origin == SO_EE_ORIGIN_ICMP || e.ee_origin == SO_EE_ORIGIN_ICMP6;
      a.error = static_cast<int>(e.ee_errno);
      a.from = offender(control.data() + data + sizeof(e), len - sizeof(e));
      return a;
    }
    const std::size_t next = off + CMSG_ALIGN(h.cmsg_len);
    if (next <= off) return std::nullopt;
    off = next;
  }
  return std::nullopt;
}

AnswerCheck check_answer(const HopAnswer& a, std::span<const std::uint8_t> q, std::uint32_t dest_qpn, std::uint32_t sent_ttl) {
  const auto no = [](const char* reason) { return AnswerCheck{0, reason}; };
  if (!a.icmp || a.from.empty()) return no("local");
  if (a.kind == HopAnswer::Kind::kOther) return no("other_type");
  if (q.size() < kMinQuotedBth) return no("short_quote");
  const auto sent = build_trace_packet(dest_qpn, 0);
  // Opcode, TVer and the flags beside it, P_Key, the bytes sent as 0, and what is quoted of the ICRC.
  for (std::size_t i : {0u, 1u, 2u, 3u, 4u, 8u})
    if (q[i] != sent[i]) return no("not_trace");
  for (std::size_t i = kMinQuotedBth; i < std::min(q.size(), kTracePacketSize); ++i)
    if (q[i] != sent[i]) return no("not_trace");
  if (q[5] != sent[5] || q[6] != sent[6] || q[7] != sent[7]) return no("wrong_qpn");
  const std::uint32_t psn = (std::uint32_t{q[9]} << 16) | (std::uint32_t{q[10]} << 8) | q[11];
  if (psn == 0 || psn > sent_ttl) return no("wrong_psn");
  return AnswerCheck{psn, ""};
}

void TokenBucket::refill(Clock::time_point now) {
  if (!started_) {
    started_ = true;
    at_ = now;
    return;
  }
  if (now <= at_) return;
  tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - at_).count() * rate_);
  at_ = now;
}

bool TokenBucket::take(Clock::time_point now) {
  refill(now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

TokenBucket::Clock::time_point TokenBucket::next(Clock::time_point now) const {
  if (!started_) return now;
  double tokens = tokens_;
  if (now > at_) tokens = std::min(burst_, tokens + std::chrono::duration<double>(now - at_).count() * rate_);
  if (tokens >= 1 || rate_ <= 0) return rate_ <= 0 && tokens < 1 ? Clock::time_point::max() : now;
  return now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>((1 - tokens) / rate_)) +
         Clock::duration(1);
}

std::vector<std::string> hop_list(const std::vector<std::string>& answers) {
  std::vector<std::string> hops;
  std::size_t last = 0;  // answered hops up to here
  for (std::size_t i = 0; i < answers.size(); ++i) {
    hops.push_back(answers[i].empty() ? std::string(1, '*') : answers[i]);
    if (!answers[i].empty()) last = i + 1;
  }
  hops.resize(last);
  return hops;
}

}  // namespace rdma::collectors::prober
