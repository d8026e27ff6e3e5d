// sysfs text attributes (sources/sysfs/parse.h): "N: NAME" enums, rates, GUIDs.
#include <cstdint>
#include <string_view>

#include "sources/sysfs/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)rdma::sysfs::parse_enum(in);
  (void)rdma::sysfs::parse_rate(in);
  if (auto g = rdma::sysfs::parse_guid(in)) {
    if (g->size() != 18 || g->compare(0, 2, "0x") != 0) __builtin_trap();  // "0x" + 16 hex digits
  }
  return 0;
}
