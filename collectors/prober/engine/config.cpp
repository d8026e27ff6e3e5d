#include "collectors/prober/engine/config.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>

#include "exporter/options.h"
#include "exporter/yaml_util.h"

namespace rdma::collectors::prober {
using exporter::ConfigError;

std::string where(const std::string& origin, const YAML::Node& n) {
  // An origin that already names a position (a flag's "file:line") keeps it.
  return origin.find(':') == std::string::npos ? exporter::yaml_position(origin, n) : origin;
}

namespace {

std::string numeric(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6) inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}
}  // namespace

std::vector<PeerSpec> parse_peers(const YAML::Node& node, const std::string& origin, std::uint16_t default_port,
                                  std::size_t max_peers) {
  std::vector<PeerSpec> out;
  if (!node || node.IsNull()) return out;
  const std::string key = "collectors.prober.peers";
  if (!node.IsSequence()) throw ConfigError(where(origin, node) + ": " + key + " must be a list of maps");
  if (node.size() > max_peers)
    throw ConfigError(where(origin, node) + ": " + key + " has " + std::to_string(node.size()) + " entries, more than " +
                      std::to_string(max_peers));
  for (const auto& item : node) {
    const std::string at = where(origin, item);
    if (!item.IsMap()) throw ConfigError(at + ": each entry of " + key + " must be a map with at least `address`");
    if (auto u = exporter::unknown_key(item, {"address", "name", "tcp_port", "group", "local_device", "local_port", "gid_index"}))
      throw ConfigError(where(origin, *u) + ": unknown key `" + u->as<std::string>("") + "` in " + key);
    PeerSpec p;
    p.source = "static";
    p.tcp_port = default_port;
    for (const auto& kv : item) {
      const auto k = kv.first.as<std::string>("");
      try {
        if (k == "address") p.address = kv.second.as<std::string>();
        else if (k == "name") p.name = kv.second.as<std::string>();
        else if (k == "group") p.group = kv.second.as<std::string>();
        else if (k == "local_device") p.local_device = kv.second.as<std::string>();
        else if (k == "tcp_port") {
          auto v = kv.second.as<int>();
          if (v < 1 || v > 65535) throw ConfigError("");
          p.tcp_port = static_cast<std::uint16_t>(v);
        } else if (k == "local_port") {
          auto v = kv.second.as<int>();
          if (v < 1 || v > 255) throw ConfigError("");
          p.local_port = static_cast<std::uint32_t>(v);
        } else if (k == "gid_index") {
          auto v = kv.second.as<int>();
          if (v < 0 || v > 65535) throw ConfigError("");
          p.gid_index = v;
        }
      } catch (const std::exception&) {
        throw ConfigError(where(origin, kv.second) + ": bad value for " + key + "[]." + k);
      }
    }
    if (p.address.empty()) throw ConfigError(at + ": " + key + "[] entry without `address`");
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<RailRule> parse_rails(const YAML::Node& node, const std::string& origin) {
  std::vector<RailRule> out;
  if (!node || node.IsNull()) return out;
  const std::string key = "collectors.prober.rails";
  if (!node.IsSequence()) throw ConfigError(where(origin, node) + ": " + key + " must be a list of maps");
  if (node.size() > kMaxTablePorts)
    throw ConfigError(where(origin, node) + ": " + key + " has " + std::to_string(node.size()) + " entries, more than " +
                      std::to_string(kMaxTablePorts));
  for (const auto& item : node) {
    const std::string at = where(origin, item);
    if (!item.IsMap()) throw ConfigError(at + ": each entry of " + key + " must be a map with `rail` and `device` or `netdev`");
    if (auto u = exporter::unknown_key(item, {"rail", "device", "netdev"}))
      throw ConfigError(where(origin, *u) + ": unknown key `" + u->as<std::string>("") + "` in " + key);
    RailRule r;
    for (const auto& kv : item) {
      const auto k = kv.first.as<std::string>("");
      std::string v;
      try {
        v = kv.second.as<std::string>();
      } catch (const std::exception&) {
        throw ConfigError(where(origin, kv.second) + ": bad value for " + key + "[]." + k);
      }
      if (k == "rail") {
        // A label value: printable, and short enough for the port table's field.
        const bool printable = std::all_of(v.begin(), v.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
        if (v.empty() || v.size() > kMaxTableString || !printable)
          throw ConfigError(where(origin, kv.second) + ": " + key + "[].rail must be 1 to " + std::to_string(kMaxTableString) +
                            " printable characters");
        r.rail = v;
        continue;
      }
      try {
        (k == "device" ? r.device : r.netdev) = std::regex(v);
      } catch (const std::regex_error& e) {
        throw ConfigError(where(origin, kv.second) + ": " + key + "[]." + k + ": bad regular expression: " + e.what());
      }
    }
    if (r.rail.empty()) throw ConfigError(at + ": " + key + "[] entry without `rail`");
    if (!r.device && !r.netdev) throw ConfigError(at + ": " + key + "[] entry needs `device` or `netdev` (a regular expression)");
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<double> parse_buckets(const std::vector<std::string>& text, const std::string& setting) {
  std::vector<double> b;
  for (const auto& t : text) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || !std::isfinite(v) || v <= 0)
      throw ConfigError(setting + ": `" + t + "` is not a positive number of seconds");
    if (!b.empty() && v <= b.back())
      throw ConfigError(setting + ": must be strictly ascending");
    b.push_back(v);
  }
  if (b.empty() || b.size() > 64) throw ConfigError(setting + ": needs 1 to 64 bounds");
  return b;
}

HostPort parse_listen(const std::string& text, const std::string& setting) {
  auto colon = text.rfind(':');
  HostPort hp;
  int port = 0;
  try {
    std::size_t used = 0;
    port = colon == std::string::npos ? 0 : std::stoi(text.substr(colon + 1), &used);
    if (used != text.size() - colon - 1) port = 0;
  } catch (const std::exception&) {
    port = 0;
  }
  if (port < 1 || port > 65535)
    throw ConfigError(setting + ": must be [host]:port, got `" + text + "`");
  hp.port = static_cast<std::uint16_t>(port);
  hp.host = text.substr(0, colon);
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') hp.host = hp.host.substr(1, hp.host.size() - 2);
  if (hp.host == "0.0.0.0" || hp.host == "::") hp.host.clear();
  return hp;
}

std::vector<std::string> resolve_all(const std::string& name, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(name.c_str(), nullptr, &hints, &res);
  std::vector<std::string> out;
  if (rc != 0) {
    error = gai_strerror(rc);
    return out;
  }
  for (auto* ai = res; ai; ai = ai->ai_next) {
    auto s = numeric(ai->ai_addr);
    if (!s.empty()) out.push_back(s);
  }
  freeaddrinfo(res);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::set<std::string> local_addresses() {
  std::set<std::string> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  for (auto* i = ifa; i; i = i->ifa_next)
    if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) out.insert(numeric(i->ifa_addr));
  freeifaddrs(ifa);
  return out;
}

bool is_self(const std::string& address, std::uint16_t port, const HostPort& listen, const std::set<std::string>& local) {
  if (port != listen.port) return false;
  if (!listen.host.empty()) return address == listen.host;
  return local.count(address) > 0;
}

Expanded expand_peers(const PeerSources& src, const HostPort& listen, const std::set<std::string>& local, std::size_t limit,
                      const std::function<std::vector<std::string>(const std::string&, std::string&)>& resolver) {
  Expanded out;
  auto add = [&](PeerSpec p, const std::string& addr) {
    if (is_self(addr, p.tcp_port, listen, local)) {
      ++out.self_excluded;
      return;
    }
    if (out.peers.size() >= limit) {
      ++out.dropped_over_limit;
      return;
    }
    if (p.name.empty()) p.name = addr;
    p.address = addr;
    out.peers.push_back(std::move(p));
  };
  for (const auto& s : src.statics) {
    std::string err;
    auto addrs = resolver(s.address, err);
    if (addrs.empty()) {
      out.errors.push_back(s.address + ": " + (err.empty() ? "no address" : err));
      continue;
    }
    add(s, addrs.front());  // a static entry is one peer
  }
  if (!src.dns_name.empty()) {
    std::string err;
    auto addrs = resolver(src.dns_name, err);
    if (addrs.empty()) out.errors.push_back(src.dns_name + ": " + (err.empty() ? "no address" : err));
    for (const auto& a : addrs) {
      PeerSpec p;
      p.source = "dns";
      p.tcp_port = src.dns_port;
      p.group = src.dns_group;
      add(p, a);
    }
  }
  return out;
}

}  // namespace rdma::collectors::prober
