#include "sources/dcb/dcbnl.h"

#include <libmnl/libmnl.h>
#include <linux/dcbnl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cstring>

namespace rdma::dcb {
namespace {

static_assert(kPriorities == IEEE_8021QAZ_MAX_TCS);

// The kernel copies its structs whole (nla_put(skb, attr, sizeof(struct ...), &s)); shorter
// payloads come from something else and are rejected.
template <class T>
bool copy_struct(const nlattr* attr, T* out) {
  if (mnl_attr_get_payload_len(attr) < sizeof(T)) return false;
  std::memcpy(out, mnl_attr_get_payload(attr), sizeof(T));
  return true;
}

}  // namespace

std::string_view IeeeConfig::trust() const {
  for (const auto& a : apps)
    if (a.selector == IEEE_8021QAZ_APP_SEL_DSCP) return "dscp";
  return "pcp";
}

Result<IeeeConfig> decode_ieee_reply(std::span<const std::uint8_t> msg) {
  using R = Result<IeeeConfig>;
  netlink::AlignedMessage a(msg);
  const nlmsghdr* nlh = a.header();
  if (!nlh) return R::failure(ReadError::kMalformed);
  if (auto e = netlink::error_code(msg)) return *e ? R::failure(classify_errno(*e), *e) : R::failure(ReadError::kMalformed);
  if (nlh->nlmsg_type != RTM_GETDCB || nlh->nlmsg_len < MNL_NLMSG_HDRLEN + sizeof(dcbmsg)) return R::failure(ReadError::kMalformed);
  const auto* dm = static_cast<const dcbmsg*>(mnl_nlmsg_get_payload(nlh));
  if (dm->cmd != DCB_CMD_IEEE_GET) return R::failure(ReadError::kMalformed);

  IeeeConfig out;
  bool good = true;
  bool ok = netlink::walk_attributes(nlh, sizeof(dcbmsg), [&](const nlattr* attr) {
    switch (mnl_attr_get_type(attr)) {
      case DCB_ATTR_DCBX:
        if (mnl_attr_get_payload_len(attr) >= 1) out.dcbx = mnl_attr_get_u8(attr);
        else good = false;
        break;
      case DCB_ATTR_IEEE:
        if (!netlink::walk_nested(attr, [&](const nlattr* ie) {
          switch (mnl_attr_get_type(ie)) {
            case DCB_ATTR_IEEE_PFC: {
              ieee_pfc p;
              if (!copy_struct(ie, &p)) { good = false; break; }
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
              if (!copy_struct(ie, &e)) { good = false; break; }
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
              if (!netlink::walk_nested(ie, [&](const nlattr* app) {
                dcb_app d;
                if (mnl_attr_get_type(app) != DCB_ATTR_IEEE_APP) return;
                if (!copy_struct(app, &d)) { good = false; return; }
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
  std::vector<std::uint8_t> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETDCB;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* dm = static_cast<dcbmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(dcbmsg)));
  dm->dcb_family = AF_UNSPEC;
  dm->cmd = DCB_CMD_IEEE_GET;
  mnl_attr_put_strz(nlh, DCB_ATTR_IFNAME, ifname.c_str());
  buf.resize(nlh->nlmsg_len);
  return buf;
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

Reader::Reader() : sock_(NETLINK_ROUTE) {}

Result<IeeeConfig> Reader::read(const std::string& ifname) {
  auto reply = sock_.request(build_ieee_get(ifname));
  if (!reply) return Result<IeeeConfig>::failure(reply.error, reply.sys_errno);
  return decode_ieee_reply(reply.value);
}

}  // namespace rdma::dcb
