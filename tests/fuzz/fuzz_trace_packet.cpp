// What reaches the tracer from the network: the control messages of an error queue read and the
// payload the kernel quotes back. Never a crash; answers carry a valid numeric address or none.
#include <arpa/inet.h>

#include <cstdint>
#include <span>

#include "collectors/prober/wire/trace_packet.h"

using namespace rdma::collectors::prober;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  if (auto a = decode_error_queue(in); a && !a->from.empty()) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, a->from.c_str(), buf) != 1 && inet_pton(AF_INET6, a->from.c_str(), buf) != 1) __builtin_trap();
  }
  // The quote check over any quote: accepted only with a TTL sent, and then the quote parses as
  // the packet that TTL's would be (its first 12 bytes).
  HopAnswer a;
  a.icmp = true;
  a.from = "10.0.0.1";
  a.kind = size % 2 ? HopAnswer::Kind::kTimeExceeded : HopAnswer::Kind::kUnreachable;
  const std::uint32_t qpn = size >= 3 ? (std::uint32_t{data[0]} << 16 | std::uint32_t{data[1]} << 8 | data[2]) : 0x11;
  if (const auto c = check_answer(a, in, qpn, 8); !*c.reason) {
    if (c.ttl == 0 || c.ttl > 8 || size < kMinQuotedBth) __builtin_trap();
    const auto sent = build_trace_packet(qpn, c.ttl);
    for (std::size_t i = 0; i < kMinQuotedBth; ++i)
      if (data[i] != sent[i]) __builtin_trap();
  }
  if (auto f = parse_trace_packet(in)) {
    const auto again = build_trace_packet(f->dest_qpn, f->seq);
    if (f->dest_qpn > 0xFFFFFF || f->seq > 0xFFFFFF || !parse_trace_packet(again)) __builtin_trap();
  }
  return 0;
}
