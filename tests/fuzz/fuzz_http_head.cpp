// The accept-side gate's reading of a new connection's first bytes (exporter/http_gate.h): whatever
// a client sends, the gate waits only while fewer than max_head bytes came, answers /healthz
// itself only for a plain GET/HEAD of /healthz whose head ends the bytes, and relays the rest.
#include <cstdint>
#include <string_view>

#include "exporter/http_gate.h"

using namespace rdma::exporter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool tls = data[0] & 1;
  const std::size_t max_head = 64 + (data[0] >> 1) * 16;  // 64 .. 2,096: heads cut and not
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const HeadVerdict v = classify_head(in, tls, max_head);
  if (v == HeadVerdict::kWait && in.size() >= max_head) __builtin_trap();  // a waiting head is bounded
  if (v == HeadVerdict::kHealthzGet || v == HeadVerdict::kHealthzHead) {
    if (tls) __builtin_trap();  // the gate cannot read inside TLS
    if (!in.starts_with(v == HeadVerdict::kHealthzGet ? "GET /healthz" : "HEAD /healthz")) __builtin_trap();
    if (!in.ends_with("\n\n") && !in.ends_with("\n\r\n")) __builtin_trap();  // nothing pipelined
  }
  return 0;
}
