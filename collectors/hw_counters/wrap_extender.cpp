#include "collectors/hw_counters/wrap_extender.h"

#include <iterator>

namespace rdma::collectors::hw_counters {

std::uint64_t WrapExtender::extend(const Key& key, std::uint8_t width, std::uint64_t raw) {
  if (width >= 64) return raw;
  const std::uint64_t modulus = std::uint64_t{1} << width;
  auto [it, inserted] = state_.try_emplace(key);
  State& s = it->second;
  if (!inserted && !s.passthrough && raw < s.last) {
    if (s.offset > UINT64_MAX - modulus) {
      s.offset = 0;  // 2^32 wraps: unreachable in practice; restart rather than overflow
    } else {
      s.offset += modulus;
    }
    ++s.wraps;
  }
  if (raw >= modulus && !s.passthrough) {
    s.passthrough = true;
    s.offset = 0;
  }
  s.last = raw;
  if (s.passthrough) return raw;
  return s.offset + raw;  // offset <= 2^64 - 2^width and raw < 2^width: no overflow
}

std::uint64_t WrapExtender::wraps(const Key& key) const {
  auto it = state_.find(key);
  return it == state_.end() ? 0 : it->second.wraps;
}

void WrapExtender::retain(const std::set<std::string>& live) {
  for (auto it = state_.begin(); it != state_.end();) {
    if (!live.contains(live_key(it->first.device, it->first.port))) it = state_.erase(it);
    else it = std::next(it);
  }
}

}  // namespace rdma::collectors::hw_counters
