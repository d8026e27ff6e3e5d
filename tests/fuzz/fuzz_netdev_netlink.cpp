// netdev collector decoders: DCB netlink (sources/dcb/dcbnl.h), ethtool netlink and ioctl string
// tables (sources/ethtool/), and the generic netlink reply helpers they share (sources/netlink/).
// The first byte picks the decoder.
#include <cstdint>
#include <span>

#include "sources/dcb/dcbnl.h"
#include "sources/ethtool/ethtool_ioctl.h"
#include "sources/ethtool/ethtool_netlink.h"
#include "sources/netlink/genetlink.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::span<const std::uint8_t> msg(data + 1, size - 1);
  switch (data[0] % 5) {
    case 0: (void)rdma::dcb::decode_ieee_reply(msg); break;
    case 1: (void)rdma::netlink::single_reply(msg); break;
    case 2: (void)rdma::netlink::decode_family_id(msg); break;
    case 3: (void)rdma::ethtool::decode_pause_reply(msg); break;
    case 4: (void)rdma::ethtool::decode_strings(msg, data[0] / 5u); break;
  }
  return 0;
}
