// RDMA netlink replies (sources/netlink/rdma_stat.h, hw_counters): one recv() buffer.
#include <cstdint>

#include "sources/netlink/rdma_stat.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)rdma::netlink::decode_messages(data, size);
  return 0;
}
