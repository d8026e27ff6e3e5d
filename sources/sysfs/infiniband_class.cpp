#include "sources/sysfs/infiniband_class.h"

#include "sources/sysfs/reader.h"

namespace rdma::sysfs {
namespace {

template <class T, class F>
Result<T> parse_attr(const std::string& path, F&& parse) {
  auto raw = read_attribute(path);
  if (!raw) return Result<T>::failure(raw.error, raw.sys_errno);
  auto v = parse(raw.value);
  if (!v) return Result<T>::failure(ReadError::kMalformed);
  return Result<T>::success(std::move(*v));
}

}  // namespace

Result<std::vector<CounterReading>> read_counter_dir(const std::string& dir) {
  auto entries = list_dir(dir);
  if (!entries) return Result<std::vector<CounterReading>>::failure(entries.error, entries.sys_errno);
  std::vector<CounterReading> out;
  out.reserve(entries.value.size());
  std::string path = dir;
  path += '/';
  const std::size_t base = path.size();
  for (auto& e : entries.value) {
    // Counter directories hold only files; anything else is read anyway and fails visibly.
    path.resize(base);
    path += e.name;
    out.push_back(CounterReading{std::move(e.name), read_u64(path)});
  }
  return Result<std::vector<CounterReading>>::success(std::move(out));
}

PortAttributes read_port_attributes(const std::string& p) {
  PortAttributes a;
  a.state = parse_attr<EnumValue>(p + "/state", parse_enum);
  a.phys_state = parse_attr<EnumValue>(p + "/phys_state", parse_enum);
  a.rate = parse_attr<Rate>(p + "/rate", parse_rate);
  a.link_layer = read_attribute(p + "/link_layer");
  a.lid = parse_attr<std::uint64_t>(p + "/lid", parse_hex_or_dec);
  a.sm_lid = parse_attr<std::uint64_t>(p + "/sm_lid", parse_hex_or_dec);
  a.lid_mask_count = parse_attr<std::uint64_t>(p + "/lid_mask_count", parse_hex_or_dec);
  a.cap_mask = parse_attr<std::uint64_t>(p + "/cap_mask", parse_hex_or_dec);
  return a;
}

DeviceAttributes read_device_attributes(const std::string& d) {
  DeviceAttributes a;
  a.node_type = parse_attr<EnumValue>(d + "/node_type", parse_enum);
  a.node_guid = parse_attr<std::string>(d + "/node_guid", parse_guid);
  a.sys_image_guid = parse_attr<std::string>(d + "/sys_image_guid", parse_guid);
  a.fw_ver = read_attribute(d + "/fw_ver");
  a.hca_type = read_attribute(d + "/hca_type");
  a.hw_rev = read_attribute(d + "/hw_rev");
  a.board_id = read_attribute(d + "/board_id");
  a.node_desc = read_attribute(d + "/node_desc");
  return a;
}

}  // namespace rdma::sysfs
