// MAD / PMA decoders (sources/mad/pma_decode.h), the counter table's value choice
// (sources/mad/pma_counters.h) on what they decode, and the ibnetdiscover node-name map parser.
#include <cstdint>
#include <span>
#include <string_view>

#include "sources/mad/pma_counters.h"
#include "sources/mad/pma_decode.h"

namespace {
// Every counter of the table, as both collectors take it from a port's decoded attributes.
void values(const rdma::mad::PortReadings& r) {
  for (const auto& c : rdma::mad::pma_counters())
    if (auto v = rdma::mad::pma_value(c, r)) (void)rdma::mad::saturated(*v);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> d(data + 1, size - 1);
  using namespace rdma::mad;
  switch (data[0] % 8) {
    case 0: (void)parse_header(d); break;
    case 1: (void)decode_class_port_info(d); break;
    case 2:
    case 3: {
      // The capability mask from the first two bytes: every path of pma_value.
      PortReadings r;
      r.cap_mask = static_cast<std::uint16_t>(d.size() >= 2 ? (d[0] << 8) | d[1] : 0);
      r.ext_failed = (data[0] & 0x80) != 0;
      if (data[0] % 8 == 2) r.pc = decode_port_counters(d);
      else r.ext = decode_port_counters_ext(d);
      values(r);
      break;
    }
    case 4: (void)decode_rcv_error_details(d); break;
    case 5: (void)decode_xmit_discard_details(d); break;
    case 6: (void)decode_vl_xmit_wait(d); break;
    case 7: (void)parse_node_name_map(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())); break;
  }
  return 0;
}
