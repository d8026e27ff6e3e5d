#include "sources/ethtool/netlink.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>

namespace rdma::netlink {
namespace {

bool walk_range(const char* p, int len, const std::function<void(const nlattr*)>& f) {
  auto* attr = reinterpret_cast<const nlattr*>(p);
  while (len > 0) {
    if (!mnl_attr_ok(attr, len)) return false;
    f(attr);
    len -= static_cast<int>(MNL_ALIGN(attr->nla_len));
    attr = reinterpret_cast<const nlattr*>(reinterpret_cast<const char*>(attr) + MNL_ALIGN(attr->nla_len));
  }
  return true;
}

}  // namespace

AlignedMessage::AlignedMessage(std::span<const std::uint8_t> bytes) : words_((bytes.size() + 3) / 4, 0), size_(bytes.size()) {
  if (!bytes.empty()) std::memcpy(words_.data(), bytes.data(), bytes.size());
}

const nlmsghdr* AlignedMessage::header() const {
  auto* nlh = reinterpret_cast<const nlmsghdr*>(words_.data());
  // mnl_nlmsg_ok compares nlmsg_len as a signed int: a length >= 2^31 would pass. Compare unsigned.
  return size_ >= sizeof(nlmsghdr) && nlh->nlmsg_len >= sizeof(nlmsghdr) && nlh->nlmsg_len <= size_ ? nlh : nullptr;
}

bool walk_attributes(const nlmsghdr* nlh, std::size_t offset, const std::function<void(const nlattr*)>& f) {
  if (nlh->nlmsg_len < MNL_NLMSG_HDRLEN + MNL_ALIGN(offset)) return false;
  const auto* payload = static_cast<const char*>(mnl_nlmsg_get_payload(nlh)) + MNL_ALIGN(offset);
  return walk_range(payload, static_cast<int>(nlh->nlmsg_len - MNL_NLMSG_HDRLEN - MNL_ALIGN(offset)), f);
}

bool walk_nested(const nlattr* nest, const std::function<void(const nlattr*)>& f) {
  return walk_range(static_cast<const char*>(mnl_attr_get_payload(nest)), static_cast<int>(mnl_attr_get_payload_len(nest)), f);
}

Socket::~Socket() {
  if (sock_) mnl_socket_close(sock_);
}

Result<std::vector<std::uint8_t>> Socket::request(std::vector<std::uint8_t> msg) {
  using R = Result<std::vector<std::uint8_t>>;
  if (!sock_) {
    sock_ = mnl_socket_open(protocol_);
    if (!sock_) return R::failure(classify_errno(errno), errno);
    if (mnl_socket_bind(sock_, 0, MNL_SOCKET_AUTOPID) < 0) {
      int err = errno;
      mnl_socket_close(sock_);
      sock_ = nullptr;
      return R::failure(classify_errno(err), err);
    }
    timeval tv{2, 0};  // a kernel answer is immediate; never hold the scrape on a lost one
    setsockopt(mnl_socket_get_fd(sock_), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  if (msg.size() < sizeof(nlmsghdr)) return R::failure(ReadError::kInvalid, EINVAL);
  const std::uint32_t seq = ++seq_;
  auto* req = reinterpret_cast<nlmsghdr*>(msg.data());
  req->nlmsg_seq = seq;
  if (mnl_socket_sendto(sock_, msg.data(), msg.size()) < 0) return R::failure(classify_errno(errno), errno);
  const std::uint32_t portid = mnl_socket_get_portid(sock_);
  std::vector<std::uint8_t> buf(MNL_SOCKET_BUFFER_SIZE * 2);
  for (int rounds = 0; rounds < 16; ++rounds) {
    ssize_t n = mnl_socket_recvfrom(sock_, buf.data(), buf.size());
    if (n < 0) {
      int err = errno;
      return R::failure(err == EAGAIN || err == EWOULDBLOCK ? ReadError::kTimeout : classify_errno(err), err);
    }
    auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data());
    int len = static_cast<int>(n);
    while (mnl_nlmsg_ok(nlh, len)) {
      if (nlh->nlmsg_seq == seq && (nlh->nlmsg_pid == portid || nlh->nlmsg_pid == 0)) {
        std::span<const std::uint8_t> one(reinterpret_cast<const std::uint8_t*>(nlh), nlh->nlmsg_len);
        if (auto e = error_code(one); e && *e != 0) return R::failure(classify_errno(*e), *e);
        return R::success({one.begin(), one.end()});
      }
      nlh = mnl_nlmsg_next(nlh, &len);
    }
  }
  return R::failure(ReadError::kMalformed, 0);
}

std::optional<int> error_code(std::span<const std::uint8_t> msg) {
  AlignedMessage a(msg);
  const nlmsghdr* nlh = a.header();
  if (!nlh || nlh->nlmsg_type != NLMSG_ERROR) return std::nullopt;
  if (nlh->nlmsg_len < MNL_NLMSG_HDRLEN + sizeof(nlmsgerr)) return EPROTO;
  const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  // -errno as the kernel writes it (errno <= 4095, MAX_ERRNO); INT_MIN would overflow the negation.
  if (err->error < -4095) return EPROTO;
  return err->error < 0 ? -err->error : err->error;
}

Result<std::uint16_t> decode_family_id(std::span<const std::uint8_t> msg) {
  using R = Result<std::uint16_t>;
  AlignedMessage a(msg);
  const nlmsghdr* nlh = a.header();
  if (!nlh) return R::failure(ReadError::kMalformed);
  std::optional<std::uint16_t> id;
  bool ok = walk_attributes(nlh, sizeof(genlmsghdr), [&](const nlattr* attr) {
    if (mnl_attr_get_type(attr) == CTRL_ATTR_FAMILY_ID && mnl_attr_get_payload_len(attr) >= sizeof(std::uint16_t))
      id = mnl_attr_get_u16(attr);
  });
  if (!ok || !id) return R::failure(ReadError::kMalformed);
  return R::success(*id);
}

Result<PauseStats> decode_pause_reply(std::span<const std::uint8_t> msg) {
  using R = Result<PauseStats>;
  AlignedMessage a(msg);
  const nlmsghdr* nlh = a.header();
  if (!nlh) return R::failure(ReadError::kMalformed);
  if (auto e = error_code(msg)) return *e ? R::failure(classify_errno(*e), *e) : R::failure(ReadError::kMalformed);
  PauseStats out;
  bool nested_ok = true;
  auto u64 = [](const nlattr* attr) -> std::optional<std::uint64_t> {
    if (mnl_attr_get_payload_len(attr) != sizeof(std::uint64_t)) return std::nullopt;
    std::uint64_t v;
    std::memcpy(&v, mnl_attr_get_payload(attr), sizeof v);
    return v;
  };
  bool ok = walk_attributes(nlh, sizeof(genlmsghdr), [&](const nlattr* attr) {
    if (mnl_attr_get_type(attr) != ETHTOOL_A_PAUSE_STATS) return;
    if (!walk_nested(attr, [&](const nlattr* s) {
      switch (mnl_attr_get_type(s)) {
        case ETHTOOL_A_PAUSE_STAT_TX_FRAMES: if (!(out.tx_frames = u64(s))) nested_ok = false; break;
        case ETHTOOL_A_PAUSE_STAT_RX_FRAMES: if (!(out.rx_frames = u64(s))) nested_ok = false; break;
        default: break;
      }
    }))
      nested_ok = false;
  });
  if (!ok || !nested_ok) return R::failure(ReadError::kMalformed);
  return R::success(out);
}

namespace {

std::vector<std::uint8_t> genl_message(std::uint16_t type, std::uint8_t cmd, std::uint8_t version,
                                       const std::function<void(nlmsghdr*)>& attrs) {
  std::vector<std::uint8_t> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  auto* g = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(nlh, sizeof(genlmsghdr)));
  g->cmd = cmd;
  g->version = version;
  attrs(nlh);
  buf.resize(nlh->nlmsg_len);
  return buf;
}

}  // namespace

std::vector<std::uint8_t> build_get_family(const std::string& name) {
  return genl_message(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1,
                      [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, name.c_str()); });
}

std::vector<std::uint8_t> build_pause_get(std::uint16_t family_id, const std::string& ifname) {
  return genl_message(family_id, ETHTOOL_MSG_PAUSE_GET, ETHTOOL_GENL_VERSION, [&](nlmsghdr* nlh) {
    nlattr* hdr = mnl_attr_nest_start(nlh, ETHTOOL_A_PAUSE_HEADER);
    mnl_attr_put_strz(nlh, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    mnl_attr_put_u32(nlh, ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_STATS);
    mnl_attr_nest_end(nlh, hdr);
  });
}

PauseReader::PauseReader() : sock_(NETLINK_GENERIC) {}

Result<PauseStats> PauseReader::read(const std::string& ifname) {
  using R = Result<PauseStats>;
  if (family_ == 0) {
    auto reply = sock_.request(build_get_family(ETHTOOL_GENL_NAME));
    // No "ethtool" family (kernels < 5.6): the standard statistics do not exist here.
    if (!reply) return R::failure(reply.error == ReadError::kNotFound ? ReadError::kNotSupported : reply.error, reply.sys_errno);
    auto id = decode_family_id(reply.value);
    if (!id) return R::failure(id.error);
    family_ = id.value;
  }
  auto reply = sock_.request(build_pause_get(family_, ifname));
  if (!reply) return R::failure(reply.error, reply.sys_errno);
  return decode_pause_reply(reply.value);
}

}  // namespace rdma::netlink
