// devlink dumps in the kernel's layout (net/devlink: devlink_nl_health_reporter_fill(),
// devlink_nl_info_fill(); u64 attributes with nla_put_u64_64bit's DEVLINK_ATTR_PAD), errors, and
// buffers cut inside and between messages.
#include <catch2/catch.hpp>

#include <libmnl/libmnl.h>
#include <linux/devlink.h>
#include <linux/genetlink.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "sources/devlink/devlink.h"
#include "sources/netlink/genetlink.h"

using namespace rdma;

namespace {

constexpr std::uint16_t kFamily = 0x15;

// nla_put_u64_64bit(): a DEVLINK_ATTR_PAD attribute first when the value would not be 8-aligned.
void put_u64(nlmsghdr* nlh, std::uint16_t type, std::uint64_t v) {
  if ((nlh->nlmsg_len + sizeof(nlattr)) % 8 != 0) mnl_attr_put(nlh, DEVLINK_ATTR_PAD, 0, nullptr);
  mnl_attr_put_u64(nlh, type, v);
}

struct Rep {
  const char* dev = "0000:08:00.0";
  const char* name = "fw";
  std::uint8_t state = 0;
  std::uint64_t errors = 0, recovers = 0, graceful_ms = 0;
  bool auto_recover = false;
  bool has_graceful = false;
  std::optional<std::uint32_t> port;
};

std::vector<std::uint8_t> reporter_msg(const Rep& r) {
  auto m = netlink::build_genl_request(kFamily, DEVLINK_CMD_HEALTH_REPORTER_GET, DEVLINK_GENL_VERSION, [&](nlmsghdr* nlh) {
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_BUS_NAME, "pci");
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_DEV_NAME, r.dev);
    if (r.port) mnl_attr_put_u32(nlh, DEVLINK_ATTR_PORT_INDEX, *r.port);
    nlattr* n = mnl_attr_nest_start(nlh, DEVLINK_ATTR_HEALTH_REPORTER);
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_HEALTH_REPORTER_NAME, r.name);
    mnl_attr_put_u8(nlh, DEVLINK_ATTR_HEALTH_REPORTER_STATE, r.state);
    put_u64(nlh, DEVLINK_ATTR_HEALTH_REPORTER_ERR_COUNT, r.errors);
    put_u64(nlh, DEVLINK_ATTR_HEALTH_REPORTER_RECOVER_COUNT, r.recovers);
    if (r.has_graceful) {
      put_u64(nlh, DEVLINK_ATTR_HEALTH_REPORTER_GRACEFUL_PERIOD, r.graceful_ms);
      mnl_attr_put_u8(nlh, DEVLINK_ATTR_HEALTH_REPORTER_AUTO_RECOVER, r.auto_recover);
    }
    mnl_attr_put_u8(nlh, DEVLINK_ATTR_HEALTH_REPORTER_AUTO_DUMP, 1);
    mnl_attr_nest_end(nlh, n);
  });
  reinterpret_cast<nlmsghdr*>(m.data())->nlmsg_flags = NLM_F_MULTI;
  return m;
}

std::vector<std::uint8_t> done_msg(int err = 0) {
  std::vector<std::uint8_t> buf(sizeof(nlmsghdr) + sizeof(int), 0);
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
  h->nlmsg_len = static_cast<std::uint32_t>(buf.size());
  h->nlmsg_type = static_cast<std::uint16_t>(err ? NLMSG_ERROR : NLMSG_DONE);
  h->nlmsg_flags = NLM_F_MULTI;
  const int code = -err;
  std::memcpy(buf.data() + sizeof(nlmsghdr), &code, sizeof code);
  return buf;
}

std::vector<std::uint8_t> concat(std::initializer_list<std::vector<std::uint8_t>> parts) {
  std::vector<std::uint8_t> out;
  for (const auto& p : parts) {
    out.insert(out.end(), p.begin(), p.end());
    out.resize(netlink::align4(out.size()));
  }
  return out;
}

std::vector<std::uint8_t> info_msg(const char* dev, const char* running_fw, const char* stored_fw) {
  auto version = [](nlmsghdr* nlh, std::uint16_t kind, const char* name, const char* value) {
    nlattr* n = mnl_attr_nest_start(nlh, kind);
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_INFO_VERSION_NAME, name);
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_INFO_VERSION_VALUE, value);
    mnl_attr_nest_end(nlh, n);
  };
  auto m = netlink::build_genl_request(kFamily, DEVLINK_CMD_INFO_GET, DEVLINK_GENL_VERSION, [&](nlmsghdr* nlh) {
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_BUS_NAME, "pci");
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_DEV_NAME, dev);
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_INFO_DRIVER_NAME, "mlx5_core");
    mnl_attr_put_strz(nlh, DEVLINK_ATTR_INFO_SERIAL_NUMBER, "MT2150X12345");
    version(nlh, DEVLINK_ATTR_INFO_VERSION_FIXED, "fw.psid", "MT_0000000359");
    version(nlh, DEVLINK_ATTR_INFO_VERSION_RUNNING, "fw.version", running_fw);
    version(nlh, DEVLINK_ATTR_INFO_VERSION_RUNNING, "fw", running_fw);
    version(nlh, DEVLINK_ATTR_INFO_VERSION_STORED, "fw.version", stored_fw);
    version(nlh, DEVLINK_ATTR_INFO_VERSION_STORED, "fw", stored_fw);
  });
  reinterpret_cast<nlmsghdr*>(m.data())->nlmsg_flags = NLM_F_MULTI;
  return m;
}

}  // namespace

TEST_CASE("devlink health reporter dump: mlx5 reporters with state, counts and recovery settings", "[unit]") {
  const auto dump = concat({reporter_msg({.name = "fw", .errors = 0, .has_graceful = false}),
                            reporter_msg({.name = "fw_fatal", .state = 1, .errors = 3, .recovers = 2, .graceful_ms = 1200000,
                                          .auto_recover = true, .has_graceful = true}),
                            reporter_msg({.name = "tx", .errors = 18446744073709551615ull, .recovers = 7, .graceful_ms = 500,
                                          .auto_recover = true, .has_graceful = true, .port = 65535}),
                            done_msg()});
  auto r = devlink::decode_health_dump(dump);
  REQUIRE(r.ok());
  REQUIRE(r.value.size() == 3);
  CHECK(r.value[0].handle.label() == "pci/0000:08:00.0");
  CHECK(r.value[0].name == "fw");
  CHECK(r.value[0].healthy);
  CHECK_FALSE(r.value[0].graceful_period_ms);
  CHECK_FALSE(r.value[0].auto_recover);
  CHECK(r.value[1].name == "fw_fatal");
  CHECK_FALSE(r.value[1].healthy);
  CHECK(r.value[1].error_count == 3);
  CHECK(r.value[1].recover_count == 2);
  CHECK(r.value[1].graceful_period_ms == 1200000u);
  CHECK(r.value[1].auto_recover == true);
  CHECK(r.value[2].error_count == 18446744073709551615ull);  // exact u64
  CHECK(r.value[2].port == 65535u);
}

TEST_CASE("devlink dumps: an empty dump, an error answer, a buffer cut inside or between messages", "[unit]") {
  auto empty = devlink::decode_health_dump(done_msg());
  REQUIRE(empty.ok());
  CHECK(empty.value.empty());
  CHECK(devlink::decode_info_dump(done_msg(EOPNOTSUPP)).error == ReadError::kNotSupported);
  CHECK(devlink::decode_health_dump(done_msg(EPERM)).error == ReadError::kAccess);
  // One buffer (one recv()) cut inside a message is an error, never a partial list; cut between
  // messages, it is the whole messages before the cut (the rest comes in the next buffer).
  // Mutated and random bytes are the fuzz_devlink target's.
  const std::vector<std::vector<std::uint8_t>> reporters{reporter_msg({.name = "rx", .errors = 1}),
                                                         reporter_msg({.name = "tx"}), done_msg()};
  const std::vector<std::vector<std::uint8_t>> infos{info_msg("0000:08:00.1", "a", "b"), done_msg()};
  // Every cut of the dump made of `msgs` (the last one the done message, which holds no item).
  auto check_cuts = [](const char* what, const std::vector<std::vector<std::uint8_t>>& msgs, auto decode) {
    std::vector<std::uint8_t> dump;
    std::map<std::size_t, std::size_t> items_at_end{{0, 0}};  // message end -> items before it
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      dump.insert(dump.end(), msgs[i].begin(), msgs[i].end());
      items_at_end[dump.size()] = std::min(i + 1, msgs.size() - 1);
    }
    REQUIRE(decode(netlink::Bytes(dump.data(), dump.size())).value.size() == msgs.size() - 1);
    for (std::size_t n = 0; n < dump.size(); ++n) {
      INFO(what << " dump cut to " << n << " of " << dump.size() << " bytes");
      const auto r = decode(netlink::Bytes(dump.data(), n));
      if (const auto at = items_at_end.find(n); at != items_at_end.end()) {
        REQUIRE(r.ok());
        CHECK(r.value.size() == at->second);
      } else {
        CHECK(r.error == ReadError::kMalformed);
      }
    }
  };
  check_cuts("health", reporters, [](netlink::Bytes b) { return devlink::decode_health_dump(b); });
  check_cuts("info", infos, [](netlink::Bytes b) { return devlink::decode_info_dump(b); });
  // A reporter without its name, or a message without the handle, is malformed.
  const auto no_name = concat({reporter_msg({.name = ""}), done_msg()});
  CHECK(devlink::decode_health_dump(no_name).error == ReadError::kMalformed);
}

TEST_CASE("devlink dev info: driver, serial, fixed/running/stored versions and a pending update", "[unit]") {
  auto same = devlink::decode_info_dump(concat({info_msg("0000:08:00.0", "28.39.1002", "28.39.1002"), done_msg()}));
  REQUIRE(same.ok());
  REQUIRE(same.value.size() == 1);
  const auto& i = same.value[0];
  CHECK(i.handle.label() == "pci/0000:08:00.0");
  CHECK(i.driver == "mlx5_core");
  CHECK(i.serial == "MT2150X12345");
  CHECK(i.fixed == std::vector<devlink::Version>{{"fw.psid", "MT_0000000359"}});
  CHECK(i.running.size() == 2);
  CHECK(i.stored.size() == 2);
  CHECK_FALSE(i.update_pending());
  auto pending = devlink::decode_info_dump(concat({info_msg("0000:08:00.0", "28.39.1002", "28.40.1000"), done_msg()}));
  REQUIRE(pending.ok());
  CHECK(pending.value[0].update_pending());
}

TEST_CASE("devlink dump request: the family, the command and NLM_F_DUMP", "[unit]") {
  const auto req = devlink::build_dump(kFamily, DEVLINK_CMD_HEALTH_REPORTER_GET);
  nlmsghdr h{};
  REQUIRE(netlink::read_value(netlink::Bytes(req), h));
  CHECK(h.nlmsg_type == kFamily);
  CHECK((h.nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP);
  genlmsghdr g{};
  REQUIRE(netlink::read_value(netlink::Bytes(req).subspan(sizeof(nlmsghdr)), g));
  CHECK(g.cmd == DEVLINK_CMD_HEALTH_REPORTER_GET);
}
