#include "sources/sysfs/infiniband_class.h"

#include "sources/sysfs/reader.h"

namespace rdma::sysfs {
namespace {

template <class T, class F>
Result<T> parse_attr(const Result<Dir>& dir, const char* name, F&& parse) {
  if (!dir) return Result<T>::failure(dir.error, dir.sys_errno);
  auto raw = dir.value.read_attribute(name);
  if (!raw) return Result<T>::failure(raw.error, raw.sys_errno);
  auto v = parse(raw.value);
  if (!v) return Result<T>::failure(ReadError::kMalformed);
  return Result<T>::success(std::move(*v));
}

Result<std::string> text_attr(const Result<Dir>& dir, const char* name) {
  if (!dir) return Result<std::string>::failure(dir.error, dir.sys_errno);
  return dir.value.read_attribute(name);
}

}  // namespace

Result<std::vector<CounterReading>> read_counter_dir(const std::string& path) {
  auto dir = Dir::open(path);
  if (!dir) return Result<std::vector<CounterReading>>::failure(dir.error, dir.sys_errno);
  auto entries = dir.value.list();
  if (!entries) return Result<std::vector<CounterReading>>::failure(entries.error, entries.sys_errno);
  std::vector<CounterReading> out;
  out.reserve(entries.value.size());
  // Counter directories hold only files; anything else is read anyway and fails visibly.
  for (auto& e : entries.value) {
    auto value = dir.value.read_u64(e.name.c_str());
    out.push_back(CounterReading{std::move(e.name), value});
  }
  return Result<std::vector<CounterReading>>::success(std::move(out));
}

PortAttributes read_port_attributes(const std::string& p) {
  const auto dir = Dir::open(p);
  PortAttributes a;
  a.state = parse_attr<EnumValue>(dir, "state", parse_enum);
  a.phys_state = parse_attr<EnumValue>(dir, "phys_state", parse_enum);
  a.rate = parse_attr<Rate>(dir, "rate", parse_rate);
  a.lid = parse_attr<std::uint64_t>(dir, "lid", parse_hex_or_dec);
  a.sm_lid = parse_attr<std::uint64_t>(dir, "sm_lid", parse_hex_or_dec);
  return a;
}

DeviceAttributes read_device_attributes(const std::string& d) {
  const auto dir = Dir::open(d);
  DeviceAttributes a;
  a.node_type = parse_attr<EnumValue>(dir, "node_type", parse_enum);
  a.node_guid = parse_attr<std::string>(dir, "node_guid", parse_guid);
  a.sys_image_guid = parse_attr<std::string>(dir, "sys_image_guid", parse_guid);
  a.fw_ver = text_attr(dir, "fw_ver");
  a.hca_type = text_attr(dir, "hca_type");
  a.hw_rev = text_attr(dir, "hw_rev");
  a.board_id = text_attr(dir, "board_id");
  a.node_desc = text_attr(dir, "node_desc");
  return a;
}

}  // namespace rdma::sysfs
