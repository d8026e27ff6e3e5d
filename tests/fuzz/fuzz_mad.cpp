// MAD / PMA decoders (sources/mad/pma_decode.h) and the ibnetdiscover node-name map parser.
#include <cstdint>
#include <span>
#include <string_view>

#include "sources/mad/pma_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> d(data + 1, size - 1);
  using namespace rdma::mad;
  switch (data[0] % 8) {
    case 0: (void)parse_header(d); break;
    case 1: (void)decode_class_port_info(d); break;
    case 2: (void)decode_port_counters(d); break;
    case 3: (void)decode_port_counters_ext(d); break;
    case 4: (void)decode_rcv_error_details(d); break;
    case 5: (void)decode_xmit_discard_details(d); break;
    case 6: (void)decode_vl_xmit_wait(d); break;
    case 7: (void)parse_node_name_map(std::string_view(reinterpret_cast<const char*>(d.data()), d.size())); break;
  }
  return 0;
}
