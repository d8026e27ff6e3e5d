// devlink dumps (sources/devlink/devlink.h): health reporters and dev info, the first byte picks.
#include <cstdint>
#include <span>

#include "sources/devlink/devlink.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> msg(data + 1, size - 1);
  if (data[0] % 2 == 0) (void)rdma::devlink::decode_health_dump(msg);
  else (void)rdma::devlink::decode_info_dump(msg);
  return 0;
}
