#include "collectors/topology/expect.h"

#include <set>

#include "exporter/options.h"

namespace rdma::collectors::topology {
namespace {

using exporter::ConfigError;

constexpr std::size_t kMaxItems = 64;  // ports rules, firmware models, versions per model

// Where an item is: origin ("file:line:col" of the expect: value, as the options give it) or, for
// a value without one, the node's own mark.
std::string at(const std::string& origin, const YAML::Node& n) {
  if (n.Mark().line >= 0 && origin.find(':') == std::string::npos)
    return origin + ":" + std::to_string(n.Mark().line + 1) + ":" + std::to_string(n.Mark().column + 1);
  return origin;
}

template <class T>
T scalar(const YAML::Node& n, const std::string& origin, const std::string& key) {
  try {
    if (!n.IsScalar()) throw YAML::Exception(n.Mark(), "not a scalar");
    return n.as<T>();
  } catch (const YAML::Exception&) {
    throw ConfigError(at(origin, n) + ": bad value for expect." + key);
  }
}

std::uint32_t bounded(const YAML::Node& n, const std::string& origin, const std::string& key, std::int64_t lo, std::int64_t hi) {
  const auto v = scalar<std::int64_t>(n, origin, key);
  if (v < lo || v > hi)
    throw ConfigError(at(origin, n) + ": expect." + key + " must be " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<std::uint32_t>(v);
}

void only(const YAML::Node& map, const std::set<std::string>& known, const std::string& origin, const std::string& what) {
  if (!map.IsMap()) throw ConfigError(at(origin, map) + ": " + what + " must be a map");
  for (const auto& kv : map) {
    const auto k = kv.first.as<std::string>();
    if (!known.count(k)) throw ConfigError(at(origin, kv.first) + ": unknown key `" + k + "` in " + what);
  }
}

std::string bounded_string(const YAML::Node& n, const std::string& origin, const std::string& key) {
  auto s = scalar<std::string>(n, origin, key);
  if (s.empty() || s.size() > 64) throw ConfigError(at(origin, n) + ": expect." + key + " must be 1 to 64 characters");
  return s;
}

}  // namespace

Expect parse_expect(const YAML::Node& node, const std::string& origin) {
  Expect e;
  if (!node || node.IsNull()) return e;
  only(node, {"devices", "gpus", "ports", "mtu", "pcie", "gpu_nic_relation", "acs_off", "peer_memory", "firmware"}, origin,
       "expect");
  e.present = true;
  if (auto n = node["devices"]) {
    e.devices_pattern = scalar<std::string>(n, origin, "devices");
    try {
      e.devices.emplace(e.devices_pattern, std::regex::extended);
    } catch (const std::regex_error& err) {
      throw ConfigError(at(origin, n) + ": expect.devices: bad regular expression: " + err.what());
    }
  }
  if (auto n = node["gpus"]) e.gpus = bounded(n, origin, "gpus", 0, 64);
  if (auto n = node["ports"]) {
    if (!n.IsSequence() || n.size() > kMaxItems)
      throw ConfigError(at(origin, n) + ": expect.ports must be a list of at most " + std::to_string(kMaxItems) + " maps");
    for (const auto& item : n) {
      only(item, {"link_layer", "count", "min_rate_gbps"}, origin, "expect.ports[]");
      PortExpect p;
      if (!item["link_layer"]) throw ConfigError(at(origin, item) + ": expect.ports[] needs link_layer");
      p.link_layer_name = scalar<std::string>(item["link_layer"], origin, "ports[].link_layer");
      if (p.link_layer_name == "InfiniBand") p.link_layer = model::LinkLayer::kInfiniBand;
      else if (p.link_layer_name == "Ethernet") p.link_layer = model::LinkLayer::kEthernet;
      else throw ConfigError(at(origin, item["link_layer"]) + ": expect.ports[].link_layer must be InfiniBand or Ethernet");
      if (item["count"]) p.count = bounded(item["count"], origin, "ports[].count", 0, 1024);
      if (item["min_rate_gbps"]) p.min_rate_gbps = bounded(item["min_rate_gbps"], origin, "ports[].min_rate_gbps", 0, 100000);
      e.ports.push_back(std::move(p));
    }
  }
  if (auto n = node["mtu"]) e.mtu = bounded(n, origin, "mtu", 68, 65535);
  if (auto n = node["pcie"]) {
    only(n, {"speed_gts", "width"}, origin, "expect.pcie");
    if (auto s = n["speed_gts"]) {
      const auto v = scalar<double>(s, origin, "pcie.speed_gts");
      if (!(v >= 2.5 && v <= 128)) throw ConfigError(at(origin, s) + ": expect.pcie.speed_gts must be 2.5 to 128");
      e.pcie_speed_tenths = static_cast<std::uint32_t>(v * 10 + 0.5);
    }
    if (auto w = n["width"]) e.pcie_width = bounded(w, origin, "pcie.width", 1, 32);
  }
  if (auto n = node["gpu_nic_relation"]) {
    pci::Relation r;
    if (!pci::parse_relation(scalar<std::string>(n, origin, "gpu_nic_relation"), r))
      throw ConfigError(at(origin, n) + ": expect.gpu_nic_relation must be PIX, PXB, PHB, NODE or SYS");
    e.gpu_nic_relation = r;
  }
  if (auto n = node["acs_off"]) e.acs_off = scalar<bool>(n, origin, "acs_off");
  if (auto n = node["peer_memory"]) {
    const auto v = scalar<std::string>(n, origin, "peer_memory");
    if (v == "true" || v == "module") e.peer_memory = Expect::PeerMemory::kModule;
    else if (v == "dma_buf") e.peer_memory = Expect::PeerMemory::kAny;
    else if (v == "false") e.peer_memory = Expect::PeerMemory::kOff;
    else throw ConfigError(at(origin, n) + ": expect.peer_memory must be true (a peer-memory module), dma_buf (or a dma-buf capable kernel) or false");
  }
  if (auto n = node["firmware"]) {
    if (!n.IsMap() || n.size() > kMaxItems)
      throw ConfigError(at(origin, n) + ": expect.firmware must be a map of at most " + std::to_string(kMaxItems) +
                        " device models to lists of versions");
    for (const auto& kv : n) {
      const auto model = bounded_string(kv.first, origin, "firmware key");
      if (!kv.second.IsSequence() || kv.second.size() == 0 || kv.second.size() > kMaxItems)
        throw ConfigError(at(origin, kv.second) + ": expect.firmware." + model + " must be a list of 1 to " +
                          std::to_string(kMaxItems) + " versions");
      auto& list = e.firmware[model];
      for (const auto& v : kv.second) list.push_back(bounded_string(v, origin, "firmware." + model + "[]"));
    }
  }
  return e;
}

}  // namespace rdma::collectors::topology
