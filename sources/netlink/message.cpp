#include "sources/netlink/message.h"

#include <libmnl/libmnl.h>

namespace rdma::netlink {

std::vector<std::uint8_t> build_request(std::uint16_t type, const void* header, std::size_t header_len,
                                        const std::function<void(nlmsghdr*)>& attributes) {
  std::vector<std::uint8_t> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = type;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  std::memcpy(mnl_nlmsg_put_extra_header(nlh, header_len), header, header_len);
  if (attributes) attributes(nlh);
  buf.resize(nlh->nlmsg_len);
  return buf;
}

std::string read_string(Bytes p) {
  const void* nul = std::memchr(p.data(), 0, p.size());
  const std::size_t n = nul ? static_cast<std::size_t>(static_cast<const std::uint8_t*>(nul) - p.data()) : p.size();
  return std::string(reinterpret_cast<const char*>(p.data()), n);
}

std::optional<int> error_code(const Message& m) {
  int code = 0;
  if (!read_value(m.payload(), code) || code > 0 || code < -4095) return std::nullopt;
  return -code;
}

Result<Message> single_reply(Bytes bytes) {
  using R = Result<Message>;
  Message m;
  if (!read_value(bytes, m.header) || m.header.nlmsg_len < sizeof(nlmsghdr) || m.header.nlmsg_len > bytes.size())
    return R::failure(ReadError::kMalformed);
  m.bytes = bytes.first(m.header.nlmsg_len);
  if (m.header.nlmsg_type != NLMSG_ERROR) return R::success(m);
  const auto e = error_code(m);
  return e && *e != 0 ? R::failure(classify_errno(*e), *e) : R::failure(ReadError::kMalformed);
}

}  // namespace rdma::netlink
