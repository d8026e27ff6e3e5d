// The query string of every extra HTTP path (exporter/query.h): whatever a caller sends, the
// parser answers with known, unrepeated, bounded parameters or a one-line error.
#include <cstdint>
#include <string>
#include <string_view>

#include "exporter/query.h"

using namespace rdma::exporter;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (auto d = percent_decode(in); d && d->size() > in.size()) __builtin_trap();
  std::string error;
  if (auto q = parse_query(in, {"module", "target", "ports"}, error)) {
    if (q->all().size() > 3) __builtin_trap();
    for (const auto& [name, value] : q->all())
      if ((name != "module" && name != "target" && name != "ports") || value.size() > kMaxQueryValue) __builtin_trap();
  } else {
    if (error.empty() || error.find('\n') != std::string::npos) __builtin_trap();
    const auto r = bad_request(error);
    if (r.status != 400 || r.body.find('\n') != r.body.size() - 1) __builtin_trap();
  }
  return 0;
}
