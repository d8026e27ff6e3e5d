// Prober settings from flags and YAML: the peer list, buckets, DNS, and the pure helpers that
// decide which resolved addresses are peers (self exclusion).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "collectors/prober/engine/engine.h"
#include "collectors/prober/engine/peer_types.h"
#include "collectors/prober/wire/host_port.h"

namespace rdma::collectors::prober {

// "file:line:col" of a YAML node for ConfigError messages (origin alone when it has no mark).
std::string where(const std::string& origin, const YAML::Node& n);

// A static peer as written in the config; `address` may be a host name (resolved like DNS peers).
std::vector<PeerSpec> parse_peers(const YAML::Node& node, const std::string& origin, std::uint16_t default_port,
                                  std::size_t max_peers);
// Rail rules as written in the config: a list of {rail, device, netdev} (regexes; at least one of
// them). Throws ConfigError with the file position of the bad entry.
std::vector<RailRule> parse_rails(const YAML::Node& node, const std::string& origin);
// `setting`: the setting as the user wrote it (CollectorSettings::where), to start error messages.
std::vector<double> parse_buckets(const std::vector<std::string>& text, const std::string& setting);

HostPort parse_listen(const std::string& text, const std::string& setting);  // "[host]:port"

// All addresses of `name` (getaddrinfo, TCP), numeric, sorted, unique. Empty + error on failure.
std::vector<std::string> resolve_all(const std::string& name, std::string& error);
// Addresses of this host's interfaces (getifaddrs), numeric.
std::set<std::string> local_addresses();
// Is a peer at address:port this very exporter? True when it is our listen address, or our
// listen address is "any" and the address is one of ours.
bool is_self(const std::string& address, std::uint16_t port, const HostPort& listen, const std::set<std::string>& local);

// Expands static and DNS peers into concrete (numeric) peers, drops self, keeps at most `limit`.
struct PeerSources {
  std::vector<PeerSpec> statics;
  std::string dns_name;
  std::uint16_t dns_port = 0;
  std::string dns_group;
};
struct Expanded {
  std::vector<PeerSpec> peers;
  std::uint64_t self_excluded = 0, dropped_over_limit = 0;
  std::vector<std::string> errors;  // "name: message" for names that did not resolve
};
Expanded expand_peers(const PeerSources& src, const HostPort& listen, const std::set<std::string>& local, std::size_t limit,
                      const std::function<std::vector<std::string>(const std::string&, std::string&)>& resolver);

}  // namespace rdma::collectors::prober
