// The kernel's PMA counter files (ports/<n>/counters, legacy counters_ext) as data: metric
// name, help, unit scale and PMA field width (the saturation point). The PMA ones are the rows of
// sources/mad/pma_counters.h that have a counters/ file, named by collectors/common/pma_names.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sources/mad/pma_counters.h"

namespace rdma::collectors::port {

struct CounterDef {
  std::string_view file;
  std::string metric;        // full metric name
  std::string_view help;
  std::uint8_t width;        // bits; 64 = no saturation indicator; 0 = depends on the table
  std::uint8_t scale;        // multiply the value by this (4-octet words -> bytes)
  const mad::PmaCounter* pma = nullptr;  // the PMA counter it shows; nullptr for driver and legacy files
};

// The PMA counters that have a counters/ file, under this collector's names, in the table's order.
const std::vector<CounterDef>& pma_counter_defs();
// counters/<file>; nullptr for a file this table does not know.
const CounterDef* find_counter(std::string_view file);
// counters_ext/<file> (kernels < 4.5, MLNX_OFED).
const CounterDef* find_legacy_counter(std::string_view file);

// Width of a table-dependent data/packet counter: 64 in the ext and noietf tables, 32 in the
// plain one. ext is recognised by its unicast counters; noietf by the driver (hfi1).
std::uint8_t data_counter_width(bool has_unicast_counters, std::string_view driver);

inline std::uint64_t max_for_width(std::uint8_t width) {
  return width >= 64 ? UINT64_MAX : ((std::uint64_t{1} << width) - 1);
}

}  // namespace rdma::collectors::port
