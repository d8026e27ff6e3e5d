#include "collectors/prober/ondemand/probe_policy.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cctype>
#include <charconv>

#include "collectors/prober/ondemand/probe_module.h"

namespace rdma::collectors::prober {

namespace {
// Numeric address -> family and 16 bytes (IPv4 in the first 4); 0 when not numeric.
int parse_address(const std::string& text, std::array<std::uint8_t, 16>& out) {
  out.fill(0);
  if (inet_pton(AF_INET, text.c_str(), out.data()) == 1) return AF_INET;
  if (inet_pton(AF_INET6, text.c_str(), out.data()) == 1) return AF_INET6;
  return 0;
}

// Host names compare without case (RFC 4343).
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::optional<Cidr> parse_cidr(std::string_view text) {
  const auto slash = text.find('/');
  Cidr c;
  c.family = parse_address(std::string(text.substr(0, slash)), c.net);
  if (!c.family) return std::nullopt;
  const int bits = c.family == AF_INET ? 32 : 128;
  c.prefix = bits;
  if (slash != std::string_view::npos) {
    const auto p = text.substr(slash + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), c.prefix);
    if (p.empty() || ec != std::errc() || end != p.data() + p.size() || c.prefix < 0 || c.prefix > bits) return std::nullopt;
  }
  for (int i = c.prefix; i < 128; ++i) c.net[i / 8] &= static_cast<std::uint8_t>(~(0x80u >> (i % 8)));
  return c;
}

bool cidr_contains(const Cidr& net, const std::string& address) {
  std::array<std::uint8_t, 16> a{};
  if (parse_address(address, a) != net.family) return false;
  for (int i = net.prefix; i < 128; ++i) a[i / 8] &= static_cast<std::uint8_t>(~(0x80u >> (i % 8)));
  return a == net.net;
}

bool target_allowed(const ProbeAccess& access, const PeerEndpoints& known, const std::string& address, std::uint16_t port) {
  if (known.count({address, port})) return true;
  if (!access.target_ports.count(port)) return false;
  for (const auto& c : access.target_cidrs)
    if (cidr_contains(c, address)) return true;
  return false;
}

std::map<std::string, std::string> peer_target_names(const std::vector<std::pair<std::string, std::string>>& name_address) {
  std::map<std::string, std::string> out;
  std::array<std::uint8_t, 16> scratch{};
  for (const auto& [name, address] : name_address) {
    if (!parse_address(address, scratch)) out.emplace(lower(address), address);
    if (!name.empty() && name != address) out.emplace(lower(name), address);
  }
  return out;
}

std::optional<std::string> target_host(const ProbeAccess& access, const std::string& host) {
  std::array<std::uint8_t, 16> scratch{};
  if (parse_address(host, scratch)) return host;
  if (auto it = access.target_names.find(lower(host)); it != access.target_names.end()) return it->second;
  return std::nullopt;
}

std::string visible_reason(const std::string& reason, bool target_failure, bool authenticated) {
  if (authenticated || !target_failure) return reason;
  return std::string(kTargetUnreachable);
}

ProbeRequestCounts& ProbeRequestCounts::process() {
  static ProbeRequestCounts counts;  // never destroyed before the last handler returns: process lifetime
  return counts;
}

void ProbeRequestCounts::add(const std::string& module, const std::string& result) {
  std::lock_guard lock(mu_);
  ++counts_[{module, result}];
}

std::map<std::pair<std::string, std::string>, std::uint64_t> ProbeRequestCounts::snapshot() const {
  std::lock_guard lock(mu_);
  return counts_;
}

SessionBudget& SessionBudget::process() {
  static SessionBudget budget(ProbeLimits::kLocalSessionBytes);
  return budget;
}

bool SessionBudget::reserve(std::size_t bytes) {
  std::lock_guard lock(mu_);
  if (bytes > limit_ - used_) return false;
  used_ += bytes;
  return true;
}

void SessionBudget::release(std::size_t bytes) {
  std::lock_guard lock(mu_);
  used_ -= std::min(used_, bytes);
}

std::size_t SessionBudget::in_use() const {
  std::lock_guard lock(mu_);
  return used_;
}

}  // namespace rdma::collectors::prober
