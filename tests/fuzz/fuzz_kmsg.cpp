// Kernel-log records (collectors/nic_health/kmsg_reader.h): the record parser, the fault table
// and the device lookup on arbitrary buffers.
#include <cstdint>
#include <string_view>

#include "collectors/nic_health/kmsg_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static rdma::collectors::nic_health::KmsgReader reader("/nonexistent");
  static bool named = [] {
    reader.set_device_names({{"0000:08:00.0", "mlx5_0"}, {"mlx5_0", "mlx5_0"}, {"eth0", "mlx5_0"}});
    return true;
  }();
  (void)named;
  reader.consume(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
