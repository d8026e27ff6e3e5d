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
  if (auto f = parse_trace_packet(in)) {
    const auto again = build_trace_packet(f->dest_qpn, f->seq);
    if (f->dest_qpn > 0xFFFFFF || f->seq > 0xFFFFFF || !parse_trace_packet(again)) __builtin_trap();
  }
  return 0;
}
