#include "sources/ethtool/ethtool_netlink.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <string_view>

#include "sources/netlink/genetlink.h"

namespace rdma::ethtool {

Result<PauseStats> decode_pause_reply(std::span<const std::uint8_t> msg) {
  using R = Result<PauseStats>;
  auto reply = netlink::single_reply(msg);
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  PauseStats out;
  bool nested_ok = true;
  auto u64 = [](netlink::Bytes v) -> std::optional<std::uint64_t> {
    std::uint64_t value = 0;
    if (v.size() != sizeof value || !netlink::read_value(v, value)) return std::nullopt;
    return value;
  };
  const bool ok = netlink::for_each_attr(reply.value, sizeof(genlmsghdr), [&](std::uint16_t type, netlink::Bytes v) {
    if (type != ETHTOOL_A_PAUSE_STATS) return;
    if (!netlink::for_each_attr(v, [&](std::uint16_t stat, netlink::Bytes sv) {
          switch (stat) {
            case ETHTOOL_A_PAUSE_STAT_TX_FRAMES: if (!(out.tx_frames = u64(sv))) nested_ok = false; break;
            case ETHTOOL_A_PAUSE_STAT_RX_FRAMES: if (!(out.rx_frames = u64(sv))) nested_ok = false; break;
            default: break;
          }
        }))
      nested_ok = false;
  });
  if (!ok || !nested_ok) return R::failure(ReadError::kMalformed);
  return R::success(out);
}

std::vector<std::uint8_t> build_pause_get(std::uint16_t family_id, const std::string& ifname) {
  return netlink::build_genl_request(family_id, ETHTOOL_MSG_PAUSE_GET, ETHTOOL_GENL_VERSION, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, ETHTOOL_A_PAUSE_HEADER);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_STATS);
    mnl_attr_nest_end(nlh, hdr);
  });
}

static_assert(std::string_view(kGenlFamily) == ETHTOOL_GENL_NAME);

Result<PauseStats> PauseReader::read(const std::string& ifname) {
  using R = Result<PauseStats>;
  // No "ethtool" family (kernels < 5.6): kNotSupported, the standard statistics do not exist here.
  auto reply = client_.request([&](std::uint16_t family) { return build_pause_get(family, ifname); });
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  return decode_pause_reply(reply.value);
}

}  // namespace rdma::ethtool
