// Transceiver module EEPROM (sources/ethtool/module_eeprom.h): the first byte picks the target.
// Pages: the input is cut into a lower page and up to four upper pages (00h, 01h/03h, 02h, 11h),
// so that short and missing pages are reached; replies: ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY bytes.
#include <cstdint>
#include <span>

#include "sources/ethtool/module_eeprom.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> in(data + 1, size - 1);
  if (data[0] % 2 == 1) {
    (void)rdma::ethtool::decode_eeprom_reply(in);
    return 0;
  }
  rdma::ethtool::ModuleMemory m;
  auto take = [&](std::size_t n) {
    n = std::min(n, in.size());
    std::vector<std::uint8_t> out(in.begin(), in.begin() + static_cast<long>(n));
    in = in.subspan(n);
    return out;
  };
  m.lower = take(128);
  (void)rdma::ethtool::read_plan(m.lower);
  const std::uint8_t pages[] = {0x00, 0x01, 0x02, 0x03, 0x11};
  for (std::uint8_t p : pages) {
    if (in.empty()) break;
    m.upper[{0, p}] = take(128);
  }
  (void)rdma::ethtool::decode_module(m);
  return 0;
}
