// Kernel-log records (collectors/nic_health/kmsg_reader.h): the record parser, the driver prefix,
// the fault table and the device lookup on arbitrary buffers. A match only ever comes from a
// kernel record (facility 0) and names a device of the model or none.
#include <cstdint>
#include <string_view>

#include "collectors/nic_health/kmsg_reader.h"

namespace nh = rdma::collectors::nic_health;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nh::DeviceNames names{{"0000:08:00.0", "mlx5_0"}, {"mlx5_0", "mlx5_0"}, {"eth0", "mlx5_0"}};
  static nh::KmsgReader reader("/nonexistent");
  static const nh::KmsgMatcher matcher;
  static bool named = [] {
    reader.set_device_names(names);
    return true;
  }();
  (void)named;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  reader.consume(in);
  if (auto p = nh::driver_prefix(in)) {
    if (p->pci_address.size() != 12 || p->driver.empty()) __builtin_trap();
  }
  if (auto r = nh::kmsg_record(in)) {
    for (const auto& m : matcher.match(*r, names)) {
      if (r->facility != 0 || m.row >= nh::kKmsgPatterns.size()) __builtin_trap();
      if (!m.device.empty() && m.device != "mlx5_0") __builtin_trap();
    }
  }
  return 0;
}
