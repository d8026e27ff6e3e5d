// Forwarding-table decoders (sources/mad/lft_decode.h): SwitchInfo (and the block count it implies)
// one LinearForwardingTable block and AdaptiveRoutingInfo, from any bytes.
#include <cstdint>
#include <span>

#include "sources/mad/lft_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> d(data + 1, size - 1);
  using namespace rdma::mad;
  if (data[0] % 3 == 0) {
    if (auto s = decode_switch_info(d)) {
      const std::size_t blocks = lft_blocks(*s);
      if (blocks < 1 || blocks > (kMaxUnicastLid / kLftBlockEntries) + 1) __builtin_trap();
    }
  } else if (data[0] % 3 == 1) {
    (void)decode_lft_block(d);
  } else if (auto a = decode_adaptive_routing_info(d)) {
    // 12-bit fields stay in range; a short buffer never decodes
    if (a->group_cap > 0xFFF || a->group_top > 0xFFF || d.size() < kAdaptiveRoutingInfoSize) __builtin_trap();
  }
  return 0;
}
