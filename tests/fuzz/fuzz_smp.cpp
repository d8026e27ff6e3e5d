// Subnet management and extended-speeds decoders (sources/mad/smp_decode.h): PortInfo (and link
// training between two decoded PortInfos), SMInfo, PortExtendedSpeedsCounters in both forms.
#include <cstdint>
#include <span>

#include "sources/mad/smp_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> d(data + 1, size - 1);
  using namespace rdma::mad;
  switch (data[0] % 4) {
    case 0: {
      // Two PortInfos from one input: the first 64 bytes and whatever follows.
      const auto a = decode_port_info(d);
      const auto b = decode_port_info(d.size() > kSmpDataSize ? d.subspan(kSmpDataSize) : d);
      if (a && b) {
        const auto t = link_training(*a, *b);
        (void)t.degraded();
        (void)phys_state_name(a->phys_state);
        (void)port_state_name(b->port_state);
      }
      break;
    }
    case 1:
      if (auto s = decode_sm_info(d)) (void)sm_state_name(s->state);
      break;
    case 2: (void)decode_ext_speeds_counters(d, false); break;
    case 3: (void)decode_ext_speeds_counters(d, true); break;
  }
  return 0;
}
