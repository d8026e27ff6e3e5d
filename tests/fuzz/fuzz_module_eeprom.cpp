// Transceiver module EEPROM (sources/ethtool/module_eeprom.h): the first byte picks the target.
// Pages: the input is cut into a lower page, an SFF-8472 A2h page and upper pages (00h, 01h/03h,
// 02h, 11h of bank 0, then 11h of banks 1-3), so that short and missing pages are reached and the
// bank plan sees what page 01h says; replies: ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY bytes.
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
  m.diagnostics = take(128);
  const std::pair<std::uint8_t, std::uint8_t> pages[] = {{0, 0x00}, {0, 0x01}, {0, 0x02}, {0, 0x03},
                                                         {0, 0x11}, {1, 0x11}, {2, 0x11}, {3, 0x11}};
  for (auto p : pages) {
    if (in.empty()) break;
    m.upper[p] = take(128);
  }
  (void)rdma::ethtool::bank_plan(m);
  (void)rdma::ethtool::decode_module(m);
  return 0;
}
