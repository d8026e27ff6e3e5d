#include "sources/netlink/rdma_stat.h"

#include "sources/netlink/message.h"

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

// Decodes `p` with decode(p, T&) and appends the value to `list` when it is well formed (the
// entries of a reply, the replies of a buffer).
template <class T, class Decode>
bool append_to(std::vector<T>& list, Bytes p, Decode decode) {
  T v;
  if (!decode(p, v)) return false;
  list.push_back(std::move(v));
  return true;
}

// The shape of every per-device reply: DEV_INDEX, DEV_NAME and one nested `list` attribute whose
// `entry` attributes are decoded by decode(payload, T&) into `entries`. Other attributes go to
// `other(type, payload)`. False when an attribute overruns, an entry is malformed or DEV_INDEX
// is missing.
template <class Reply, class T, class Decode, class Other>
bool decode_device_reply(Bytes body, std::uint16_t list, std::uint16_t entry, Reply& out, std::vector<T>& entries,
                         Decode decode, Other&& other) {
  bool has_dev = false, entries_ok = true;
  const bool ok = for_each_attr(body, [&](std::uint16_t t, Bytes v) {
    if (t == kAttrDevIndex) has_dev = read_value(v, out.dev_index);
    else if (t == kAttrDevName) out.dev_name = read_string(v);
    else if (t == list) {
      entries_ok = for_each_attr(v, [&](std::uint16_t et, Bytes ev) {
                     if (et == entry && !append_to(entries, ev, decode)) entries_ok = false;
                   }) && entries_ok;
    } else {
      other(t, v);
    }
  });
  return ok && entries_ok && has_dev;
}

constexpr auto kNoOther = [](std::uint16_t, Bytes) {};

bool decode_counter(Bytes p, HwCounter& out) {
  bool has_name = false, has_value = false;
  const bool ok = for_each_attr(p, [&](std::uint16_t t, Bytes v) {
    if (t == kAttrStatHwCounterEntryName) {
      out.name = read_string(v);
      has_name = true;
    } else if (t == kAttrStatHwCounterEntryValue) {
      has_value = read_value(v, out.value);
    }
  });
  return ok && has_name && has_value && !out.name.empty();
}

bool decode_stat(Bytes p, PortStats& out) {
  bool has_port = false;
  const bool ok = decode_device_reply(p, kAttrStatHwCounters, kAttrStatHwCounterEntry, out, out.counters, decode_counter,
                                      [&](std::uint16_t t, Bytes v) {
                                        if (t == kAttrPortIndex) has_port = read_value(v, out.port);
                                      });
  return ok && has_port;
}

bool decode_device(Bytes p, DeviceEntry& out) {
  bool has_index = false, has_name = false;
  const bool ok = for_each_attr(p, [&](std::uint16_t t, Bytes v) {
    if (t == kAttrDevIndex) has_index = read_value(v, out.index);
    else if (t == kAttrDevName) {
      out.name = read_string(v);
      has_name = !out.name.empty();
    }
  });
  return ok && has_index && has_name;
}

bool decode_qp(Bytes p, QpEntry& out) {
  bool has_lqpn = false, fields_ok = true;
  const bool ok = for_each_attr(p, [&](std::uint16_t t, Bytes v) {
    if (t == kAttrPortIndex) fields_ok = read_value(v, out.port) && fields_ok;
    else if (t == kAttrResLqpn) has_lqpn = read_value(v, out.lqpn);
    else if (t == kAttrResType) fields_ok = read_value(v, out.type) && fields_ok;
    else if (t == kAttrResState) fields_ok = read_value(v, out.state) && fields_ok;
    else if (t == kAttrResPid) fields_ok = read_value(v, out.pid) && fields_ok;
    else if (t == kAttrResKernName) out.kern_name = read_string(v);
  });
  return ok && fields_ok && has_lqpn;
}

bool decode_qps(Bytes p, DeviceQps& out) {
  return decode_device_reply(p, kAttrResQp, kAttrResQpEntry, out, out.qps, decode_qp, kNoOther) && !out.dev_name.empty();
}

bool decode_summary_entry(Bytes p, std::pair<std::string, std::uint64_t>& out) {
  bool has_name = false, has_curr = false;
  const bool ok = for_each_attr(p, [&](std::uint16_t t, Bytes v) {
    if (t == kAttrResSummaryEntryName) {
      out.first = read_string(v);
      has_name = !out.first.empty();
    } else if (t == kAttrResSummaryEntryCurr) {
      has_curr = read_value(v, out.second);
    }
  });
  return ok && has_name && has_curr;
}

bool decode_summary(Bytes p, ResourceSummary& out) {
  return decode_device_reply(p, kAttrResSummary, kAttrResSummaryEntry, out, out.counts, decode_summary_entry, kNoOther) &&
         !out.dev_name.empty();
}

}  // namespace

Decoded decode_messages(const std::uint8_t* data, std::size_t len) {
  Decoded d;
  if (data == nullptr) return d;
  const bool whole = for_each_message(Bytes(data, len), [&](const Message& m) {
    d.seqs.push_back(m.header.nlmsg_seq);
    const Bytes body = m.payload();
    auto take = [&](auto& list, auto decode) {
      if (!append_to(list, body, decode)) d.malformed = true;
    };
    const std::uint16_t type = m.header.nlmsg_type;
    if (type == NLMSG_DONE) {
      d.done = true;
    } else if (type == NLMSG_ERROR) {
      d.done = true;
      if (auto e = error_code(m)) d.error = *e;
      else d.malformed = true;
    } else if (type == nldev_type(kCmdStatGet)) {
      take(d.stats, decode_stat);
    } else if (type == nldev_type(kCmdGet)) {
      take(d.devices, decode_device);
    } else if (type == nldev_type(kCmdResQpGet)) {
      take(d.qps, decode_qps);
    } else if (type == nldev_type(kCmdResGet)) {
      take(d.resources, decode_summary);
    }
    // NLMSG_NOOP, NLMSG_OVERRUN and other types: ignored.
  });
  if (!whole) d.malformed = true;  // a message overruns the buffer, or a truncated one at the end
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
