#include "sources/pci/tree.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>

#include "sources/sysfs/parse.h"

namespace rdma::pci {
namespace {

using Issues = std::vector<std::pair<std::string, ReadError>>;

std::vector<std::string_view> components(std::string_view p) {
  std::vector<std::string_view> out;
  while (!p.empty()) {
    auto slash = p.find('/');
    auto c = p.substr(0, slash);
    if (!c.empty()) out.push_back(c);
    if (slash == std::string_view::npos) break;
    p.remove_prefix(slash + 1);
  }
  return out;
}

// One attribute of a function; a file that is not there is the function's state (nullopt, no issue).
template <class Parse>
auto attribute(const std::string& dir, const char* name, Parse parse, Issues& issues) -> decltype(parse(std::string_view())) {
  const std::string path = dir + "/" + name;
  auto raw = sysfs::read_file(path);
  if (!raw) {
    if (raw.error != ReadError::kNotFound) issues.emplace_back(path, raw.error);
    return std::nullopt;
  }
  auto v = parse(raw.value);
  if (!v) issues.emplace_back(path, ReadError::kMalformed);
  return v;
}

std::optional<std::uint64_t> hex(std::string_view raw, std::uint64_t max) {
  auto s = sysfs::trim_value(raw);
  if (!s.starts_with("0x")) return std::nullopt;
  auto v = sysfs::parse_hex_or_dec(s);
  if (!v || *v > max) return std::nullopt;
  return v;
}

constexpr GpuClass kGpuClasses[] = {
    {0x0302, 0, "3D controller (NVIDIA data-center GPUs: H100/H200/B200 SXM, A100)"},
    {0x0300, 0x10de, "VGA controller, NVIDIA (PCIe and workstation GPUs)"},
    {0x0300, 0x1002, "VGA controller, AMD"},
    {0x0380, 0x1002, "display controller, AMD (Instinct MI200/MI300)"},
    {0x1200, 0x1da3, "processing accelerator, Habana Gaudi"},
};

}  // namespace

std::string Location::dir_of(std::size_t i) const {
  // dir ends in chain[0]/chain[1]/.../chain.back(): drop the components below chain[i].
  std::string out = dir;
  for (std::size_t k = chain.size() - 1; k > i; --k) out.resize(out.size() - chain[k].size() - 1);
  return out;
}

std::optional<Location> locate(std::string_view canonical_path) {
  auto parts = components(canonical_path);
  // Drop what lies below the deepest function (virtio0, net/..., infiniband/...).
  std::size_t end = parts.size();
  while (end > 0 && !is_bdf(parts[end - 1])) --end;
  if (end == 0) return std::nullopt;
  std::size_t begin = end;
  while (begin > 0 && is_bdf(parts[begin - 1])) --begin;
  if (begin == 0 || !is_host_bridge(parts[begin - 1])) return std::nullopt;
  Location loc;
  loc.host_bridge = std::string(parts[begin - 1]);
  for (std::size_t i = begin; i < end; ++i) loc.chain.emplace_back(parts[i]);
  // The directory: the path up to and including the deepest function.
  const auto last = parts[end - 1];
  loc.dir = std::string(canonical_path.substr(0, static_cast<std::size_t>(last.data() - canonical_path.data()) + last.size()));
  return loc;
}

Result<std::string> canonical(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> p(::realpath(path.c_str(), nullptr), &std::free);
  if (!p) return Result<std::string>::failure(classify_errno(errno), errno);
  return Result<std::string>::success(p.get());
}

Identity read_identity(const std::string& dir, Issues& issues) {
  Identity id;
  if (auto v = attribute(dir, "class", [](std::string_view s) { return hex(s, 0xffffff); }, issues)) id.class_code = std::uint32_t(*v);
  if (auto v = attribute(dir, "vendor", [](std::string_view s) { return hex(s, 0xffff); }, issues)) id.vendor = std::uint16_t(*v);
  if (auto v = attribute(dir, "device", [](std::string_view s) { return hex(s, 0xffff); }, issues)) id.device = std::uint16_t(*v);
  if (auto v = attribute(dir, "numa_node", parse_numa_node, issues)) id.numa_node = *v;
  return id;
}

Acs read_acs(const std::string& dir, Issues& issues) {
  const std::string path = dir + "/config";
  auto raw = sysfs::read_file(path);
  if (!raw) {
    // Not there (a fake tree without config) or not readable: ACS unknown, which is state.
    if (raw.error != ReadError::kNotFound && raw.error != ReadError::kAccess) issues.emplace_back(path, raw.error);
    return Acs{};
  }
  const auto& s = raw.value;
  const std::size_t n = s.size() < kConfigSpaceSize ? s.size() : kConfigSpaceSize;
  return find_acs(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()), n));
}

std::span<const GpuClass> gpu_classes() { return kGpuClasses; }

bool is_gpu(const Identity& id) {
  for (const auto& c : kGpuClasses)
    if ((id.class_code >> 8) == c.class_subclass && (c.vendor == 0 || c.vendor == id.vendor)) return true;
  return false;
}

GpuScan scan_gpus(const std::string& sysfs_root) {
  GpuScan scan;
  const std::string bus = sysfs_root + "/bus/pci/devices";
  auto names = sysfs::list_names(bus);
  if (!names) {
    if (names.error != ReadError::kNotFound) scan.issues.emplace_back(bus, names.error);
    return scan;
  }
  scan.bus_present = true;
  for (const auto& name : names.value) {
    if (!is_bdf(name)) continue;
    ++scan.functions;
    const std::string link = bus + "/" + name;
    // The class alone decides; the rest is read for accelerators only.
    auto cls = sysfs::read_file(link + "/class");
    if (!cls) {
      if (cls.error != ReadError::kNotFound) scan.issues.emplace_back(link + "/class", cls.error);
      continue;
    }
    auto code = hex(cls.value, 0xffffff);
    if (!code) {
      scan.issues.emplace_back(link + "/class", ReadError::kMalformed);
      continue;
    }
    const auto sub = std::uint16_t(*code >> 8);
    bool candidate = false;
    for (const auto& c : kGpuClasses) candidate = candidate || c.class_subclass == sub;
    if (!candidate) continue;
    auto dir = canonical(link);
    if (!dir) {
      scan.issues.emplace_back(link, dir.error);
      continue;
    }
    auto loc = locate(dir.value);
    if (!loc) continue;  // not below a host bridge: no place in the tree to relate
    Gpu g{std::move(*loc), read_identity(dir.value, scan.issues)};
    if (is_gpu(g.identity)) scan.gpus.push_back(std::move(g));
  }
  return scan;
}

Health read_health(sysfs::KeptDir& dir, bool aer_types, bool maxima, Issues& issues) {
  Health h;
  auto names = dir.names();
  auto one = [&](const char* name, auto parse) -> decltype(parse(std::string_view())) {
    if (names && !std::binary_search(names.value->begin(), names.value->end(), std::string_view(name))) return std::nullopt;
    auto raw = dir.read_file(name);
    if (!raw) {
      if (raw.error != ReadError::kNotFound) issues.emplace_back(dir.path() + "/" + name, raw.error);
      return std::nullopt;
    }
    auto v = parse(raw.value);
    // "Unknown" (link down, reserved speed) is the link's state, not a malformed file.
    if (!v && !is_unknown_speed(raw.value)) issues.emplace_back(dir.path() + "/" + name, ReadError::kMalformed);
    return v;
  };
  h.link.current_speed = one("current_link_speed", parse_link_speed);
  h.link.current_width = one("current_link_width", parse_link_width);
  if (maxima) {
    h.link.max_speed = one("max_link_speed", parse_link_speed);
    h.link.max_width = one("max_link_width", parse_link_width);
  }
  for (const auto& [sev, file] : kAerFiles) {
    auto& slot = h.aer[static_cast<std::size_t>(sev)];
    if (aer_types) {
      slot = one(file, parse_aer);
    } else {
      // The total alone; a file without a TOTAL_* line is still a valid one with no total.
      slot = one(file, [](std::string_view raw) -> std::optional<AerCounters> {
        if (auto total = parse_aer_total(raw)) return AerCounters{{}, total};
        auto all = parse_aer(raw);
        if (all) all->types.clear();
        return all;
      });
    }
  }
  return h;
}

}  // namespace rdma::pci
