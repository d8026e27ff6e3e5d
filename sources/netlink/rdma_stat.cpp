#include "sources/netlink/rdma_stat.h"

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>

#include <cstring>

namespace rdma::netlink {

static_assert(kNetlinkRdma == NETLINK_RDMA);
static_assert(kClientNldev == RDMA_NL_NLDEV);
static_assert(kCmdGet == RDMA_NLDEV_CMD_GET && kCmdStatGet == RDMA_NLDEV_CMD_STAT_GET);
static_assert(kAttrDevIndex == RDMA_NLDEV_ATTR_DEV_INDEX && kAttrDevName == RDMA_NLDEV_ATTR_DEV_NAME &&
              kAttrPortIndex == RDMA_NLDEV_ATTR_PORT_INDEX);
static_assert(kAttrStatHwCounters == RDMA_NLDEV_ATTR_STAT_HWCOUNTERS &&
              kAttrStatHwCounterEntry == RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY &&
              kAttrStatHwCounterEntryName == RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME &&
              kAttrStatHwCounterEntryValue == RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE);
static_assert(kCmdResGet == RDMA_NLDEV_CMD_RES_GET && kCmdResQpGet == RDMA_NLDEV_CMD_RES_QP_GET);
static_assert(kAttrResSummary == RDMA_NLDEV_ATTR_RES_SUMMARY && kAttrResSummaryEntry == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY &&
              kAttrResSummaryEntryName == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME &&
              kAttrResSummaryEntryCurr == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR);
static_assert(kAttrResQp == RDMA_NLDEV_ATTR_RES_QP && kAttrResQpEntry == RDMA_NLDEV_ATTR_RES_QP_ENTRY &&
              kAttrResLqpn == RDMA_NLDEV_ATTR_RES_LQPN && kAttrResType == RDMA_NLDEV_ATTR_RES_TYPE &&
              kAttrResState == RDMA_NLDEV_ATTR_RES_STATE && kAttrResPid == RDMA_NLDEV_ATTR_RES_PID &&
              kAttrResKernName == RDMA_NLDEV_ATTR_RES_KERN_NAME);
static_assert(nldev_type(kCmdStatGet) == RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_STAT_GET));

namespace {

constexpr std::size_t kHdr = sizeof(nlmsghdr);      // 16
constexpr std::size_t kAttrHdr = sizeof(nlattr);    // 4
constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Iterates the attributes of [p, p+len). Calls f(type without flags, payload, payload length)
// for each; returns false when an attribute overruns the buffer.
template <class F>
bool for_each_attr(const std::uint8_t* p, std::size_t len, F&& f) {
  std::size_t off = 0;
  while (off + kAttrHdr <= len) {
    const auto alen = load<std::uint16_t>(p + off);
    const auto type = static_cast<std::uint16_t>(load<std::uint16_t>(p + off + 2) & NLA_TYPE_MASK);
    if (alen < kAttrHdr || alen > len - off) return false;
    f(type, p + off + kAttrHdr, static_cast<std::size_t>(alen - kAttrHdr));
    off += align4(alen);
  }
  return true;  // trailing bytes shorter than an attribute header are padding
}

bool get_u32(const std::uint8_t* p, std::size_t n, std::uint32_t& out) {
  if (n < 4) return false;
  out = load<std::uint32_t>(p);
  return true;
}

// NLA_NUL_STRING: up to the first NUL; a string without NUL is taken whole.
std::string get_str(const std::uint8_t* p, std::size_t n) {
  const void* nul = std::memchr(p, 0, n);
  return std::string(reinterpret_cast<const char*>(p), nul ? static_cast<const std::uint8_t*>(nul) - p : n);
}

bool decode_entry(const std::uint8_t* p, std::size_t n, HwCounter& out) {
  bool has_name = false, has_value = false;
  const bool ok = for_each_attr(p, n, [&](std::uint16_t t, const std::uint8_t* v, std::size_t vn) {
    if (t == kAttrStatHwCounterEntryName) {
      out.name = get_str(v, vn);
      has_name = true;
    } else if (t == kAttrStatHwCounterEntryValue && vn >= 8) {
      out.value = load<std::uint64_t>(v);
      has_value = true;
    }
  });
  return ok && has_name && has_value && !out.name.empty();
}

bool decode_stat(const std::uint8_t* p, std::size_t n, PortStats& out) {
  bool has_dev = false, has_port = false, entries_ok = true;
  const bool ok = for_each_attr(p, n, [&](std::uint16_t t, const std::uint8_t* v, std::size_t vn) {
    if (t == kAttrDevIndex) has_dev = get_u32(v, vn, out.dev_index);
    else if (t == kAttrDevName) out.dev_name = get_str(v, vn);
    else if (t == kAttrPortIndex) has_port = get_u32(v, vn, out.port);
    else if (t == kAttrStatHwCounters) {
      entries_ok = for_each_attr(v, vn, [&](std::uint16_t et, const std::uint8_t* ev, std::size_t evn) {
                     if (et != kAttrStatHwCounterEntry) return;
                     HwCounter c;
                     if (decode_entry(ev, evn, c)) out.counters.push_back(std::move(c));
                     else entries_ok = false;
                   }) && entries_ok;
    }
  });
  return ok && entries_ok && has_dev && has_port;
}

bool decode_device(const std::uint8_t* p, std::size_t n, DeviceEntry& out) {
  bool has_index = false, has_name = false;
  const bool ok = for_each_attr(p, n, [&](std::uint16_t t, const std::uint8_t* v, std::size_t vn) {
    if (t == kAttrDevIndex) has_index = get_u32(v, vn, out.index);
    else if (t == kAttrDevName) {
      out.name = get_str(v, vn);
      has_name = !out.name.empty();
    }
  });
  return ok && has_index && has_name;
}

bool get_u8(const std::uint8_t* p, std::size_t n, std::uint8_t& out) {
  if (n < 1) return false;
  out = *p;
  return true;
}

bool decode_qp(const std::uint8_t* p, std::size_t n, QpEntry& out) {
  bool has_lqpn = false, fields_ok = true;
  const bool ok = for_each_attr(p, n, [&](std::uint16_t t, const std::uint8_t* v, std::size_t vn) {
    if (t == kAttrPortIndex) fields_ok = get_u32(v, vn, out.port) && fields_ok;
    else if (t == kAttrResLqpn) has_lqpn = get_u32(v, vn, out.lqpn);
    else if (t == kAttrResType) fields_ok = get_u8(v, vn, out.type) && fields_ok;
    else if (t == kAttrResState) fields_ok = get_u8(v, vn, out.state) && fields_ok;
    else if (t == kAttrResPid) fields_ok = get_u32(v, vn, out.pid) && fields_ok;
    else if (t == kAttrResKernName) out.kern_name = get_str(v, vn);
  });
  return ok && fields_ok && has_lqpn;
}

bool decode_qps(const std::uint8_t* p, std::size_t n, DeviceQps& out) {
  bool has_dev = false, entries_ok = true;
  const bool ok = for_each_attr(p, n, [&](std::uint16_t t, const std::uint8_t* v, std::size_t vn) {
    if (t == kAttrDevIndex) has_dev = get_u32(v, vn, out.dev_index);
    else if (t == kAttrDevName) out.dev_name = get_str(v, vn);
    else if (t == kAttrResQp) {
      entries_ok = for_each_attr(v, vn, [&](std::uint16_t et, const std::uint8_t* ev, std::size_t evn) {
                     if (et != kAttrResQpEntry) return;
                     QpEntry q;
                     if (decode_qp(ev, evn, q)) out.qps.push_back(std::move(q));
                     else entries_ok = false;
                   }) && entries_ok;
    }
  });
  return ok && entries_ok && has_dev && !out.dev_name.empty();
}

bool decode_summary(const std::uint8_t* p, std::size_t n, ResourceSummary& out) {
  bool has_dev = false, entries_ok = true;
  const bool ok = for_each_attr(p, n, [&](std::uint16_t t, const std::uint8_t* v, std::size_t vn) {
    if (t == kAttrDevIndex) has_dev = get_u32(v, vn, out.dev_index);
    else if (t == kAttrDevName) out.dev_name = get_str(v, vn);
    else if (t == kAttrResSummary) {
      entries_ok = for_each_attr(v, vn, [&](std::uint16_t et, const std::uint8_t* ev, std::size_t evn) {
                     if (et != kAttrResSummaryEntry) return;
                     std::string name;
                     std::uint64_t curr = 0;
                     bool has_name = false, has_curr = false;
                     const bool eok = for_each_attr(ev, evn, [&](std::uint16_t ft, const std::uint8_t* fv, std::size_t fn) {
                       if (ft == kAttrResSummaryEntryName) {
                         name = get_str(fv, fn);
                         has_name = !name.empty();
                       } else if (ft == kAttrResSummaryEntryCurr && fn >= 8) {
                         curr = load<std::uint64_t>(fv);
                         has_curr = true;
                       }
                     });
                     if (eok && has_name && has_curr) out.counts.emplace_back(std::move(name), curr);
                     else entries_ok = false;
                   }) && entries_ok;
    }
  });
  return ok && entries_ok && has_dev && !out.dev_name.empty();
}

}  // namespace

Decoded decode_messages(const std::uint8_t* data, std::size_t len) {
  Decoded d;
  if (data == nullptr) return d;
  std::size_t off = 0;
  while (off + kHdr <= len) {
    const auto h = load<nlmsghdr>(data + off);
    if (h.nlmsg_len < kHdr || h.nlmsg_len > len - off) {
      d.malformed = true;
      return d;
    }
    d.seqs.push_back(h.nlmsg_seq);
    const std::uint8_t* body = data + off + kHdr;
    const std::size_t blen = h.nlmsg_len - kHdr;
    if (h.nlmsg_type == NLMSG_DONE) {
      d.done = true;
    } else if (h.nlmsg_type == NLMSG_ERROR) {
      d.done = true;
      if (blen < sizeof(int)) d.malformed = true;
      else {
        const int e = load<int>(body);
        // The kernel writes -errno, errno <= 4095 (MAX_ERRNO); anything else (INT_MIN would
        // overflow the negation) is not a kernel error code.
        if (e < 0 && e >= -4095) d.error = -e;
        else if (e != 0) d.malformed = true;
      }
    } else if (h.nlmsg_type == nldev_type(kCmdStatGet)) {
      PortStats s;
      if (decode_stat(body, blen, s)) d.stats.push_back(std::move(s));
      else d.malformed = true;
    } else if (h.nlmsg_type == nldev_type(kCmdGet)) {
      DeviceEntry e;
      if (decode_device(body, blen, e)) d.devices.push_back(std::move(e));
      else d.malformed = true;
    } else if (h.nlmsg_type == nldev_type(kCmdResQpGet)) {
      DeviceQps q;
      if (decode_qps(body, blen, q)) d.qps.push_back(std::move(q));
      else d.malformed = true;
    } else if (h.nlmsg_type == nldev_type(kCmdResGet)) {
      ResourceSummary r;
      if (decode_summary(body, blen, r)) d.resources.push_back(std::move(r));
      else d.malformed = true;
    }
    // NLMSG_NOOP, NLMSG_OVERRUN and other types: ignored.
    off += align4(h.nlmsg_len);
  }
  if (off < len) d.malformed = true;  // a truncated message at the end
  return d;
}

MessageBuilder::MessageBuilder(std::uint16_t type, std::uint16_t flags, std::uint32_t seq, std::uint32_t pid) {
  nlmsghdr h{};
  h.nlmsg_len = kHdr;
  h.nlmsg_type = type;
  h.nlmsg_flags = flags;
  h.nlmsg_seq = seq;
  h.nlmsg_pid = pid;
  buf_.resize(kHdr);
  std::memcpy(buf_.data(), &h, kHdr);
}

MessageBuilder& MessageBuilder::raw(std::uint16_t type, const void* p, std::size_t n) {
  const std::size_t start = buf_.size();
  const auto alen = static_cast<std::uint16_t>(kAttrHdr + n);
  buf_.resize(start + align4(alen), 0);
  std::memcpy(buf_.data() + start, &alen, 2);
  std::memcpy(buf_.data() + start + 2, &type, 2);
  if (n) std::memcpy(buf_.data() + start + kAttrHdr, p, n);
  return *this;
}

MessageBuilder& MessageBuilder::u8(std::uint16_t type, std::uint8_t v) { return raw(type, &v, sizeof v); }

MessageBuilder& MessageBuilder::u32(std::uint16_t type, std::uint32_t v) { return raw(type, &v, sizeof v); }

MessageBuilder& MessageBuilder::u64(std::uint16_t type, std::uint64_t v) {
  // Like nla_put_u64_64bit: a PAD attribute first when the payload would not be 8-aligned.
  if ((buf_.size() + kAttrHdr) % 8 != 0) raw(RDMA_NLDEV_ATTR_PAD, nullptr, 0);
  return raw(type, &v, sizeof v);
}

MessageBuilder& MessageBuilder::str(std::uint16_t type, const std::string& v) {
  return raw(type, v.c_str(), v.size() + 1);
}

MessageBuilder& MessageBuilder::begin_nest(std::uint16_t type) {
  nests_.push_back(buf_.size());
  return raw(static_cast<std::uint16_t>(type | NLA_F_NESTED), nullptr, 0);
}

MessageBuilder& MessageBuilder::end_nest() {
  if (nests_.empty()) return *this;
  const std::size_t start = nests_.back();
  nests_.pop_back();
  const auto alen = static_cast<std::uint16_t>(buf_.size() - start);
  std::memcpy(buf_.data() + start, &alen, 2);
  return *this;
}

std::vector<std::uint8_t> MessageBuilder::finish() {
  while (!nests_.empty()) end_nest();
  const auto len = static_cast<std::uint32_t>(buf_.size());
  std::memcpy(buf_.data(), &len, 4);
  return std::move(buf_);
}

std::vector<std::uint8_t> encode_stat_get(std::uint32_t seq, std::uint32_t dev_index, std::uint32_t port) {
  return MessageBuilder(nldev_type(kCmdStatGet), NLM_F_REQUEST | NLM_F_ACK, seq)
      .u32(kAttrDevIndex, dev_index)
      .u32(kAttrPortIndex, port)
      .finish();
}

std::vector<std::uint8_t> encode_dev_dump(std::uint32_t seq) {
  return MessageBuilder(nldev_type(kCmdGet), NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq).finish();
}

std::vector<std::uint8_t> encode_qp_dump(std::uint32_t seq, std::uint32_t dev_index) {
  // The kernel dumps one device's resources per request (DEV_INDEX is required).
  return MessageBuilder(nldev_type(kCmdResQpGet), NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq).u32(kAttrDevIndex, dev_index).finish();
}

std::vector<std::uint8_t> encode_res_dump(std::uint32_t seq) {
  return MessageBuilder(nldev_type(kCmdResGet), NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq).finish();
}

std::vector<std::uint8_t> encode_error(std::uint32_t seq, int negative_errno) {
  MessageBuilder b(NLMSG_ERROR, 0, seq);
  nlmsgerr e{};
  e.error = negative_errno;
  e.msg.nlmsg_seq = seq;
  auto out = b.finish();
  const std::size_t at = out.size();
  out.resize(at + sizeof e);
  std::memcpy(out.data() + at, &e, sizeof e);
  const auto len = static_cast<std::uint32_t>(out.size());
  std::memcpy(out.data(), &len, 4);
  return out;
}

std::vector<std::uint8_t> encode_done(std::uint32_t seq) {
  auto out = MessageBuilder(NLMSG_DONE, NLM_F_MULTI, seq).finish();
  const std::size_t at = out.size();
  out.resize(at + 4, 0);  // the kernel's DONE carries an int (0)
  const auto len = static_cast<std::uint32_t>(out.size());
  std::memcpy(out.data(), &len, 4);
  return out;
}

}  // namespace rdma::netlink
