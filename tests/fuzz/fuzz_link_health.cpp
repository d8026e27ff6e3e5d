// ethtool netlink link state and FEC decoders (sources/ethtool/link_health.h) and the label
// tables of what they decode. The first byte picks the decoder.
#include <cstdint>
#include <span>

#include "sources/ethtool/link_health.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> msg(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    if (auto r = rdma::ethtool::decode_linkstate_reply(msg); r && r.value.ext_state)
      (void)rdma::ethtool::ext_substate_label(*r.value.ext_state, r.value.ext_substate.value_or(0));
  } else {
    if (auto r = rdma::ethtool::decode_fec_reply(msg); r && r.value.active_mode_bit)
      (void)rdma::ethtool::fec_mode_label(*r.value.active_mode_bit);
  }
  return 0;
}
