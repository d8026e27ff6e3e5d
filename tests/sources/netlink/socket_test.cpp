// The netlink socket and walker shared by the RDMA nldev, ethtool and dcbnl readers: the pure
// walker on constructed bytes at any alignment, and the socket against this kernel's rtnetlink
// (unprivileged GETLINK requests on the loopback netdev, which every network namespace has).
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include <libmnl/libmnl.h>

#include "sources/netlink/message.h"
#include "sources/netlink/rdma_stat.h"
#include "sources/netlink/socket.h"

using namespace rdma;
using namespace rdma::netlink;

namespace {

// RTM_GETLINK for one netdev by name, or (NLM_F_DUMP) for all.
std::vector<std::uint8_t> getlink(const char* name, std::uint16_t flags = 0) {
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  auto req = build_request(RTM_GETLINK, &ifi, sizeof ifi, [&](nlmsghdr* nlh) {
    if (name) mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
  });
  reinterpret_cast<nlmsghdr*>(req.data())->nlmsg_flags |= flags;
  return req;
}

// IFLA_IFNAME of an RTM_NEWLINK message; empty when it has none.
std::string ifname(const Message& m) {
  std::string name;
  for_each_attr(m, sizeof(ifinfomsg), [&](std::uint16_t type, Bytes v) {
    if (type == IFLA_IFNAME) name = read_string(v);
  });
  return name;
}

}  // namespace

TEST_CASE("netlink walker: messages and attributes at any alignment, lengths checked") {
  auto two = MessageBuilder(nldev_type(kCmdGet), NLM_F_MULTI, 5).u32(kAttrDevIndex, 7).str(kAttrDevName, "mlx5_0").finish();
  const auto done = encode_done(5);
  two.insert(two.end(), done.begin(), done.end());
  for (std::size_t shift = 0; shift < 4; ++shift) {
    std::vector<std::uint8_t> buf(shift, 0xee);
    buf.insert(buf.end(), two.begin(), two.end());
    const Bytes bytes = Bytes(buf).subspan(shift);
    std::vector<std::uint16_t> types;
    std::string name;
    std::uint32_t index = 0;
    CHECK(for_each_message(bytes, [&](const Message& m) {
      types.push_back(m.header.nlmsg_type);
      if (m.header.nlmsg_type == NLMSG_DONE) return;
      CHECK(for_each_attr(m, 0, [&](std::uint16_t t, Bytes v) {
        if (t == kAttrDevIndex) CHECK(read_value(v, index));
        if (t == kAttrDevName) name = read_string(v);
      }));
    }));
    CHECK(types == std::vector<std::uint16_t>{nldev_type(kCmdGet), NLMSG_DONE});
    CHECK(index == 7);
    CHECK(name == "mlx5_0");
    // Cut anywhere inside the second message: the first is still seen, the walk reports the cut.
    int seen = 0;
    CHECK_FALSE(for_each_message(bytes.first(bytes.size() - 1), [&](const Message&) { ++seen; }));
    CHECK(seen == 1);
  }
}

TEST_CASE("netlink single reply: the kernel's errno, an ACK or a bad code is malformed") {
  auto e = single_reply(encode_error(1, -EOPNOTSUPP));
  CHECK(e.error == ReadError::kNotSupported);
  CHECK(e.sys_errno == EOPNOTSUPP);
  CHECK(single_reply(encode_error(1, 0)).error == ReadError::kMalformed);
  CHECK(single_reply(encode_error(1, 5)).error == ReadError::kMalformed);
  CHECK(single_reply(encode_error(1, -5000)).error == ReadError::kMalformed);
  CHECK(single_reply({}).error == ReadError::kMalformed);
  auto ok = single_reply(encode_done(3));
  REQUIRE(ok.ok());
  CHECK(ok.value.header.nlmsg_type == NLMSG_DONE);
}

TEST_CASE("netlink socket: a dump is collected until DONE, a GET gets its one answer") {
  Socket sock(NETLINK_ROUTE, std::chrono::seconds(10));
  std::vector<std::string> names;
  bool done = false;
  CHECK(sock.transact(getlink(nullptr, NLM_F_DUMP), [&](const Message& m) {
    if (m.header.nlmsg_type == RTM_NEWLINK) names.push_back(ifname(m));
    done = m.header.nlmsg_type == NLMSG_DONE || m.header.nlmsg_type == NLMSG_ERROR;
    return done;
  }) == 0);
  CHECK(done);
  CHECK(std::find(names.begin(), names.end(), "lo") != names.end());

  auto lo = sock.request(getlink("lo"));
  REQUIRE(lo.ok());
  auto m = single_reply(lo.value);
  REQUIRE(m.ok());
  CHECK(m.value.header.nlmsg_type == RTM_NEWLINK);
  CHECK(ifname(m.value) == "lo");

  auto absent = sock.request(getlink("rdmaexp-none0"));
  CHECK(absent.error == ReadError::kNoDevice);
  CHECK(absent.sys_errno == ENODEV);
  CHECK(sock.requests() == 3);
}

TEST_CASE("netlink socket: replies to an abandoned request are skipped by the next one") {
  Socket sock(NETLINK_ROUTE, std::chrono::seconds(10));
  // A GET with NLM_F_ACK is answered by two datagrams, the link and then the ACK: stopping at the
  // link leaves the ACK queued.
  std::vector<std::uint16_t> types;
  auto record = [&](const Message& m) {
    types.push_back(m.header.nlmsg_type);
    return true;
  };
  CHECK(sock.transact(getlink("lo", NLM_F_ACK), record) == 0);
  CHECK(types == std::vector<std::uint16_t>{RTM_NEWLINK});
  // The next request sees its own answer, not that ACK.
  types.clear();
  CHECK(sock.transact(getlink("lo"), record) == 0);
  CHECK(types == std::vector<std::uint16_t>{RTM_NEWLINK});
}

TEST_CASE("netlink socket: no answer within the receive timeout is ETIMEDOUT") {
  // rtnetlink answers a NOOP only with the ACK it was asked for: without NLM_F_ACK, nothing comes.
  Socket sock(NETLINK_ROUTE, std::chrono::milliseconds(50));
  int calls = 0;
  CHECK(sock.transact(MessageBuilder(NLMSG_NOOP, NLM_F_REQUEST, 0).finish(), [&](const Message&) {
    ++calls;
    return true;
  }) == ETIMEDOUT);
  CHECK(calls == 0);
}
