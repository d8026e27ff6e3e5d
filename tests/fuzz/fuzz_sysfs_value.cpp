// sysfs numeric values (sources/sysfs/parse.h): counters, hex/decimal attributes, N/A literal.
#include <cstdint>
#include <string_view>

#include "sources/sysfs/parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto t = rdma::sysfs::trim_value(in);
  // The trimmed view lies inside the input (leading blanks and trailing whitespace removed).
  if (t.size() > in.size() || (t.size() && (t.data() < in.data() || t.data() + t.size() > in.data() + in.size())))
    __builtin_trap();
  if (auto v = rdma::sysfs::parse_u64(in)) {
    // An accepted counter is exactly the value of its decimal digits (leading zeros allowed).
    std::uint64_t acc = 0;
    for (char c : t) {
      if (c < '0' || c > '9') __builtin_trap();
      if (__builtin_mul_overflow(acc, 10u, &acc) || __builtin_add_overflow(acc, unsigned(c - '0'), &acc))
        __builtin_trap();
    }
    if (acc != *v) __builtin_trap();
  }
  (void)rdma::sysfs::parse_hex_or_dec(in);
  (void)rdma::sysfs::is_not_available(in);
  return 0;
}
