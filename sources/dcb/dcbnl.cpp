#include "sources/dcb/dcbnl.h"

#include <libmnl/libmnl.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

namespace rdma::dcb {

static_assert(kPriorities == IEEE_8021QAZ_MAX_TCS);

std::string_view IeeeConfig::trust() const {
  for (const auto& a : apps)
    if (a.selector == IEEE_8021QAZ_APP_SEL_DSCP) return "dscp";
  return "pcp";
}

// The kernel copies its structs whole (nla_put(skb, attr, sizeof(struct ...), &s)); shorter
// payloads come from something else and are rejected (read_value).
Result<IeeeConfig> decode_ieee_reply(std::span<const std::uint8_t> msg) {
  using R = Result<IeeeConfig>;
  auto reply = netlink::single_reply(msg);
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  dcbmsg dm;
  if (reply.value.header.nlmsg_type != RTM_GETDCB || !netlink::read_value(reply.value.payload(), dm) || dm.cmd != DCB_CMD_IEEE_GET)
    return R::failure(ReadError::kMalformed);

  IeeeConfig out;
  bool good = true;
  bool ok = netlink::for_each_attr(reply.value, sizeof(dcbmsg), [&](std::uint16_t type, netlink::Bytes v) {
    switch (type) {
      case DCB_ATTR_DCBX:
        if (std::uint8_t dcbx = 0; netlink::read_value(v, dcbx)) out.dcbx = dcbx;
        else good = false;
        break;
      case DCB_ATTR_IEEE:
        if (!netlink::for_each_attr(v, [&](std::uint16_t ie_type, netlink::Bytes ie) {
          switch (ie_type) {
            case DCB_ATTR_IEEE_PFC: {
              ieee_pfc p;
              if (!netlink::read_value(ie, p)) { good = false; break; }
              Pfc& o = out.pfc.emplace();
              o.capability = p.pfc_cap;
              o.enabled_mask = p.pfc_en;
              o.delay = p.delay;
              for (int i = 0; i < kPriorities; ++i) {
                o.requests[i] = p.requests[i];
                o.indications[i] = p.indications[i];
              }
              break;
            }
            case DCB_ATTR_IEEE_ETS: {
              ieee_ets e;
              if (!netlink::read_value(ie, e)) { good = false; break; }
              Ets& o = out.ets.emplace();
              o.willing = e.willing;
              o.capability = e.ets_cap;
              for (int i = 0; i < kPriorities; ++i) {
                o.tc_tx_bandwidth[i] = e.tc_tx_bw[i];
                o.tc_tsa[i] = e.tc_tsa[i];
                o.priority_tc[i] = e.prio_tc[i];
              }
              break;
            }
            case DCB_ATTR_IEEE_APP_TABLE:
              if (!netlink::for_each_attr(ie, [&](std::uint16_t app_type, netlink::Bytes app) {
                dcb_app d;
                if (app_type != DCB_ATTR_IEEE_APP) return;
                if (!netlink::read_value(app, d)) { good = false; return; }
                out.apps.push_back(App{d.selector, d.priority, d.protocol});
              }))
                good = false;
              break;
            default: break;  // peer ETS/PFC/APP, maxrate, QCN: not exported
          }
        }))
          good = false;
        break;
      default: break;
    }
  });
  if (!ok || !good) return R::failure(ReadError::kMalformed);
  return R::success(std::move(out));
}

std::vector<std::uint8_t> build_ieee_get(const std::string& ifname) {
  dcbmsg dm{};
  dm.dcb_family = AF_UNSPEC;
  dm.cmd = DCB_CMD_IEEE_GET;
  return netlink::build_request(RTM_GETDCB, &dm, sizeof dm,
                                [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, DCB_ATTR_IFNAME, ifname.c_str()); });
}

std::string_view selector_label(std::uint8_t selector) {
  switch (selector) {
    case IEEE_8021QAZ_APP_SEL_ETHERTYPE: return "ethertype";
    case IEEE_8021QAZ_APP_SEL_STREAM: return "tcp";
    case IEEE_8021QAZ_APP_SEL_DGRAM: return "udp";
    case IEEE_8021QAZ_APP_SEL_ANY: return "port";
    case IEEE_8021QAZ_APP_SEL_DSCP: return "dscp";
    default: return "other";
  }
}

std::string_view tsa_label(std::uint8_t tsa) {
  switch (tsa) {
    case IEEE_8021QAZ_TSA_STRICT: return "strict";
    case IEEE_8021QAZ_TSA_CB_SHAPER: return "cbs";
    case IEEE_8021QAZ_TSA_ETS: return "ets";
    case IEEE_8021QAZ_TSA_VENDOR: return "vendor";
    default: return "unknown";
  }
}

Reader::Reader(std::chrono::milliseconds receive_timeout) : sock_(NETLINK_ROUTE, receive_timeout) {}

Result<IeeeConfig> Reader::read(const std::string& ifname) {
  auto reply = sock_.request(build_ieee_get(ifname));
  if (!reply) return Result<IeeeConfig>::failure(reply.error, reply.sys_errno);
  return decode_ieee_reply(reply.value);
}

}  // namespace rdma::dcb
