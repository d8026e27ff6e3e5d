#include "sources/netlink/genetlink.h"

#include <libmnl/libmnl.h>
#include <linux/genetlink.h>

namespace rdma::netlink {

std::vector<std::uint8_t> build_genl_request(std::uint16_t family, std::uint8_t cmd, std::uint8_t version,
                                             const std::function<void(nlmsghdr*)>& attributes) {
  genlmsghdr g{};
  g.cmd = cmd;
  g.version = version;
  return build_request(family, &g, sizeof g, attributes);
}

std::vector<std::uint8_t> build_get_family(const std::string& name) {
  return build_genl_request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1,
                            [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, CTRL_ATTR_FAMILY_NAME, name.c_str()); });
}

Result<std::uint16_t> decode_family_id(Bytes msg) {
  using R = Result<std::uint16_t>;
  auto reply = single_reply(msg);
  if (!reply) return R::failure(ReadError::kMalformed);
  std::optional<std::uint16_t> id;
  const bool ok = for_each_attr(reply.value, sizeof(genlmsghdr), [&](std::uint16_t type, Bytes v) {
    std::uint16_t value = 0;
    if (type == CTRL_ATTR_FAMILY_ID && read_value(v, value)) id = value;
  });
  if (!ok || !id) return R::failure(ReadError::kMalformed);
  return R::success(*id);
}

Result<std::uint16_t> resolve_family(Socket& sock, const std::string& name) {
  using R = Result<std::uint16_t>;
  auto reply = sock.request(build_get_family(name));
  // The controller answers ENOENT for a family this kernel does not have.
  if (!reply) return R::failure(reply.error == ReadError::kNotFound ? ReadError::kNotSupported : reply.error, reply.sys_errno);
  return decode_family_id(reply.value);
}

GenlClient::GenlClient(std::string family, std::chrono::milliseconds receive_timeout)
    : sock_(NETLINK_GENERIC, receive_timeout), name_(std::move(family)) {}

Result<std::uint16_t> GenlClient::family() {
  if (family_ != 0) return Result<std::uint16_t>::success(family_);
  auto id = resolve_family(sock_, name_);
  if (id) family_ = id.value;
  return id;
}

Result<std::vector<std::uint8_t>> GenlClient::request(const std::function<std::vector<std::uint8_t>(std::uint16_t)>& build) {
  auto id = family();
  if (!id) return Result<std::vector<std::uint8_t>>::failure(id.error, id.sys_errno);
  return sock_.request(build(id.value));
}

}  // namespace rdma::netlink
