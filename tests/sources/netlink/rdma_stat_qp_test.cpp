// RES_QP_GET and RES_GET dumps as the kernel writes them (drivers/infiniband/core/nldev.c):
// QP owners (PID or kernel module), ports, multi-message dumps; corruption is reported.
#include <linux/netlink.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "sources/netlink/rdma_stat.h"

using namespace rdma::netlink;

namespace {

struct Qp {
  std::uint32_t port, lqpn, pid;
  const char* kern;
};

std::vector<std::uint8_t> qp_message(std::uint32_t seq, std::uint32_t dev, const std::string& name,
                                     const std::vector<Qp>& qps) {
  MessageBuilder b(nldev_type(kCmdResQpGet), NLM_F_MULTI, seq, 1234);
  b.u32(kAttrDevIndex, dev).str(kAttrDevName, name).begin_nest(kAttrResQp);
  for (const auto& q : qps) {
    b.begin_nest(kAttrResQpEntry);
    if (q.port != 0) b.u32(kAttrPortIndex, q.port);
    b.u32(kAttrResLqpn, q.lqpn).u8(kAttrResType, 2).u8(kAttrResState, 3);
    if (q.kern != nullptr) b.str(kAttrResKernName, q.kern);
    else if (q.pid != 0) b.u32(kAttrResPid, q.pid);
    b.end_nest();
  }
  b.end_nest();
  return b.finish();
}

std::vector<std::uint8_t> cat(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("a QP dump split over two messages decodes every owner") {
  auto buf = cat(cat(qp_message(7, 2, "rxe1", {{1, 1, 0, "ib_core"}, {0, 17, 4242, nullptr}}),
                     qp_message(7, 2, "rxe1", {{1, 18, 4243, nullptr}, {1, 19, 0, nullptr}})),
                 encode_done(7));
  Decoded d = decode_messages(buf.data(), buf.size());
  CHECK_FALSE(d.malformed);
  CHECK(d.done);
  REQUIRE(d.qps.size() == 2);
  CHECK(d.qps[0].dev_index == 2);
  CHECK(d.qps[0].dev_name == "rxe1");
  REQUIRE(d.qps[0].qps.size() == 2);
  CHECK(d.qps[0].qps[0].kernel());
  CHECK(d.qps[0].qps[0].kern_name == "ib_core");
  CHECK(d.qps[0].qps[0].port == 1);
  CHECK(d.qps[0].qps[0].type == 2);
  CHECK(d.qps[0].qps[0].state == 3);
  CHECK_FALSE(d.qps[0].qps[1].kernel());
  CHECK(d.qps[0].qps[1].port == 0);  // not bound yet
  CHECK(d.qps[0].qps[1].lqpn == 17);
  CHECK(d.qps[0].qps[1].pid == 4242);
  REQUIRE(d.qps[1].qps.size() == 2);
  CHECK(d.qps[1].qps[0].pid == 4243);
  CHECK(d.qps[1].qps[1].pid == 0);  // a zombie owner: no PID attribute
  CHECK(d.stats.empty());
  CHECK(d.devices.empty());
}

TEST_CASE("the QP dump request names the device, as the kernel requires") {
  auto req = encode_qp_dump(9, 5);
  nlmsghdr h;
  std::memcpy(&h, req.data(), sizeof h);
  CHECK(h.nlmsg_type == nldev_type(kCmdResQpGet));
  CHECK(h.nlmsg_flags == (NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP));
  CHECK(h.nlmsg_seq == 9);
  REQUIRE(req.size() == sizeof h + 8);
  std::uint16_t type;
  std::uint32_t index;
  std::memcpy(&type, req.data() + sizeof h + 2, 2);
  std::memcpy(&index, req.data() + sizeof h + 4, 4);
  CHECK(type == kAttrDevIndex);
  CHECK(index == 5);
}

TEST_CASE("a RES_GET summary decodes each resource's count") {
  MessageBuilder b(nldev_type(kCmdResGet), NLM_F_MULTI, 3, 1234);
  b.u32(kAttrDevIndex, 1).str(kAttrDevName, "mlx5_0").begin_nest(kAttrResSummary);
  for (auto [name, n] : {std::pair<const char*, std::uint64_t>{"pd", 3}, {"qp", 18446744073709551615ull}, {"mr", 0}})
    b.begin_nest(kAttrResSummaryEntry).str(kAttrResSummaryEntryName, name).u64(kAttrResSummaryEntryCurr, n).end_nest();
  auto buf = cat(b.finish(), encode_done(3));
  Decoded d = decode_messages(buf.data(), buf.size());
  CHECK_FALSE(d.malformed);
  REQUIRE(d.resources.size() == 1);
  CHECK(d.resources[0].dev_name == "mlx5_0");
  REQUIRE(d.resources[0].counts.size() == 3);
  CHECK(d.resources[0].counts[1].first == "qp");
  CHECK(d.resources[0].counts[1].second == 18446744073709551615ull);
}

TEST_CASE("a QP entry without its number, a short PID or a truncated dump is malformed") {
  MessageBuilder no_lqpn(nldev_type(kCmdResQpGet), NLM_F_MULTI, 1);
  no_lqpn.u32(kAttrDevIndex, 1).str(kAttrDevName, "rxe0").begin_nest(kAttrResQp).begin_nest(kAttrResQpEntry).u32(
      kAttrResPid, 5);
  auto m = no_lqpn.finish();
  CHECK(decode_messages(m.data(), m.size()).malformed);

  MessageBuilder short_pid(nldev_type(kCmdResQpGet), NLM_F_MULTI, 1);
  std::uint16_t two = 2;
  short_pid.u32(kAttrDevIndex, 1).str(kAttrDevName, "rxe0").begin_nest(kAttrResQp).begin_nest(kAttrResQpEntry).u32(
      kAttrResLqpn, 5).raw(kAttrResPid, &two, 2);
  m = short_pid.finish();
  CHECK(decode_messages(m.data(), m.size()).malformed);

  auto full = qp_message(1, 1, "rxe0", {{1, 17, 99, nullptr}, {1, 18, 99, nullptr}});
  for (std::size_t cut = 1; cut < full.size(); ++cut) {
    Decoded d = decode_messages(full.data(), cut);
    INFO(cut);
    CHECK((d.malformed || cut < sizeof(nlmsghdr)));
    CHECK(d.qps.empty());
  }
}
