#include "sources/sysfs/infiniband_class.h"

#include "sources/sysfs/reader.h"

namespace rdma::sysfs {
namespace {

template <class T, class F>
Result<T> parse_attr(KeptDir& dir, const char* name, F&& parse) {
  auto raw = dir.read_attribute(name);
  if (!raw) return Result<T>::failure(raw.error, raw.sys_errno);
  auto v = parse(raw.value);
  if (!v) return Result<T>::failure(ReadError::kMalformed);
  return Result<T>::success(std::move(*v));
}

}  // namespace

PortAttributes read_port_attributes(KeptDir& dir) {
  PortAttributes a;
  a.state = parse_attr<EnumValue>(dir, "state", parse_enum);
  a.phys_state = parse_attr<EnumValue>(dir, "phys_state", parse_enum);
  a.rate = parse_attr<Rate>(dir, "rate", parse_rate);
  a.lid = parse_attr<std::uint64_t>(dir, "lid", parse_hex_or_dec);
  a.sm_lid = parse_attr<std::uint64_t>(dir, "sm_lid", parse_hex_or_dec);
  return a;
}

void read_device_attributes(KeptDir& dir, DeviceAttributes& a) {
  bool fixed_ok = true;
  for (ReadError e : {a.node_type.error, a.node_guid.error, a.sys_image_guid.error, a.hca_type.error, a.hw_rev.error,
                      a.board_id.error})
    fixed_ok &= e == ReadError::kNone || e == ReadError::kNotFound;
  if (a.generation == 0 || a.generation != dir.generation() || !fixed_ok) {
    a.node_type = parse_attr<EnumValue>(dir, "node_type", parse_enum);
    a.node_guid = parse_attr<std::string>(dir, "node_guid", parse_guid);
    a.sys_image_guid = parse_attr<std::string>(dir, "sys_image_guid", parse_guid);
    a.hca_type = dir.read_attribute("hca_type");
    a.hw_rev = dir.read_attribute("hw_rev");
    a.board_id = dir.read_attribute("board_id");
    a.generation = dir.generation();
  }
  a.fw_ver = dir.read_attribute("fw_ver");
  a.node_desc = dir.read_attribute("node_desc");
}

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

Result<std::vector<CounterReading>> read_counter_dir(KeptDir& dir) {
  auto names = dir.names();
  if (!names) return Result<std::vector<CounterReading>>::failure(names.error, names.sys_errno);
  std::vector<CounterReading> out;
  out.reserve(names.value->size());
  for (std::size_t i = 0; i < names.value->size(); ++i)
    out.push_back(CounterReading{(*names.value)[i], dir.read_u64_at(i)});
  return Result<std::vector<CounterReading>>::success(std::move(out));
}

}  // namespace rdma::sysfs
