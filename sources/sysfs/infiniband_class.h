// Typed views of /sys/class/infiniband/<dev> and its ports, in the style of prometheus/procfs:
// structs from files, no metric names. Every field carries its own read result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sources/sysfs/parse.h"
#include "sources/common/result.h"
#include "sources/sysfs/reader.h"

namespace rdma::sysfs {

struct CounterReading {
  std::string name;                 // file name exactly as the kernel wrote it (may hold ' ' or ',')
  Result<std::uint64_t> value;
};

// Every regular file of a counter directory (counters/, counters_ext/, hw_counters/), sorted by
// name. The directory itself missing -> kNotFound.
Result<std::vector<CounterReading>> read_counter_dir(const std::string& dir);
// The same through descriptors kept across scrapes (refreshed by KeptDirs::at()).
Result<std::vector<CounterReading>> read_counter_dir(KeptDir& dir);

struct PortAttributes {
  Result<EnumValue> state;
  Result<EnumValue> phys_state;
  Result<Rate> rate;
  Result<std::uint64_t> lid;
  Result<std::uint64_t> sm_lid;
};
// link_layer is read once per scrape by the host model (PortModel::link_layer), not here.
PortAttributes read_port_attributes(KeptDir& port_dir);

struct DeviceAttributes {
  Result<EnumValue> node_type;
  Result<std::string> node_guid;       // canonical "0x0c42a103004029a0"
  Result<std::string> sys_image_guid;  // canonical
  Result<std::string> fw_ver;          // may be empty (rxe)
  Result<std::string> hca_type;        // optional, driver-specific
  Result<std::string> hw_rev;
  Result<std::string> board_id;
  Result<std::string> node_desc;
  // The KeptDir::generation() the fixed attributes were read in (0: not read yet).
  std::uint64_t generation = 0;
};
// Brings `a` up to date from the device's directory. node_type, the GUIDs, hca_type, hw_rev and
// board_id are set when the device registers and cannot change while its directory keeps its
// identity: they are read again only when the directory was reopened (a device registered again
// is a new directory) or when one of them failed otherwise than by being absent. fw_ver (a live
// firmware activation changes it without re-registration) and node_desc (writable) are read every time.
void read_device_attributes(KeptDir& device_dir, DeviceAttributes& a);

}  // namespace rdma::sysfs
