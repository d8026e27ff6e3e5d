// PCI sysfs attributes and config space (sources/pci/parse.h): link speed/width, NUMA node, the
// aer_dev_* files (long and short names) and the ACS walk of the extended capability list.
#include <cstdint>
#include <span>
#include <string_view>

#include "sources/pci/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  (void)rdma::pci::parse_link_speed(in);
  (void)rdma::pci::is_unknown_speed(in);
  (void)rdma::pci::parse_link_width(in);
  (void)rdma::pci::parse_numa_node(in);
  (void)rdma::pci::parse_aer_total(in);
  if (auto a = rdma::pci::parse_aer(in)) {
    if (a->types.size() > rdma::pci::kMaxAerTypes) __builtin_trap();
    for (const auto& t : a->types) {
      if (t.name.empty() || t.name.size() > rdma::pci::kMaxAerNameLength || t.name.starts_with("TOTAL_")) __builtin_trap();
      // A known bit is named by its short name, whichever spelling the file had.
      if (t.bit < -1 || t.bit > 31) __builtin_trap();
      if (const auto* b = rdma::pci::aer_bit_name(t.name); b && b->bit != t.bit) __builtin_trap();
    }
  }
  auto acs = rdma::pci::find_acs(std::span<const std::uint8_t>(data, size));
  // A capability found lies inside the image, past the legacy header, dword-aligned.
  if (acs.state == rdma::pci::Acs::State::kPresent &&
      (acs.offset < rdma::pci::kLegacyConfigSize || acs.offset + 8u > size || acs.offset % 4)) __builtin_trap();
  if (acs.state == rdma::pci::Acs::State::kUnreadable && size >= rdma::pci::kLegacyConfigSize) __builtin_trap();
  return 0;
}
