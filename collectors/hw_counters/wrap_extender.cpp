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

std::uint64_t WrapExtender::extend_inferred(const Key& key, std::uint64_t raw) {
  auto [it, inserted] = state_.try_emplace(key);
  State& s = it->second;
  if (raw > s.max_seen) s.max_seen = raw;
  if (s.passthrough || s.max_seen > UINT32_MAX) {
    // Shown to be wider than 32 bits: 64-bit, passed through from here on.
    s.passthrough = true;
    s.offset = 0;
    s.last = raw;
    return raw;
  }
  std::uint8_t width = 8;
  while (width < 32 && (s.max_seen >> width) != 0) width = static_cast<std::uint8_t>(width * 2);
  const std::uint64_t modulus = std::uint64_t{1} << width;
  if (!inserted && raw < s.last && s.last >= modulus / 2) {
    // offset grows by at most 2^32 per wrap: restart rather than overflow (unreachable).
    s.offset = s.offset > UINT64_MAX - modulus - UINT32_MAX ? 0 : s.offset + modulus;
    ++s.wraps;
  }
  s.last = raw;
  return s.offset + raw;
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
