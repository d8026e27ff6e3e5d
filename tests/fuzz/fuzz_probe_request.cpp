// What a /probe caller controls before any connection: the query string (parse_probe_query), its
// target (split_target) and the allow-list decision on it (parse_cidr, target_allowed), which must
// never let an address outside the networks through.
#include <cstdint>
#include <string>
#include <string_view>

#include "collectors/prober/ondemand/probe_module.h"
#include "collectors/prober/ondemand/probe_policy.h"

using namespace rdma::collectors::prober;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string error;
  if (auto q = parse_probe_query(in, error)) {
    if (q->module.empty() || q->target.empty() || q->module.size() > 255 || q->target.size() > 255) __builtin_trap();
    if (auto hp = split_target(q->target, 9662)) {
      if (hp->host.empty() || hp->port == 0) __builtin_trap();
      ProbeAccess access;
      access.target_cidrs = {*parse_cidr("10.0.0.0/8")};
      access.target_ports = {9662};
      const bool allowed = target_allowed(access, {}, hp->host, hp->port);
      if (allowed && (hp->port != 9662 || !cidr_contains(access.target_cidrs[0], hp->host))) __builtin_trap();
    }
  }
  if (auto c = parse_cidr(in)) {
    if (c->prefix < 0 || c->prefix > 128) __builtin_trap();
    (void)cidr_contains(*c, std::string(in.substr(0, in.find('/'))));
  }
  return 0;
}
