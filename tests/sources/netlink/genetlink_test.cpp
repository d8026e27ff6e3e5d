#include <catch2/catch.hpp>
#include <linux/genetlink.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "sources/netlink/genetlink.h"

using rdma::ReadError;
using rdma::netlink::GenlClient;

// "nlctrl" (the controller itself, GENL_ID_CTRL) is in every kernel with generic netlink.
TEST_CASE("GenlClient: one lookup of its family, kept for every request") {
  GenlClient ctrl("nlctrl", std::chrono::seconds(10));
  auto id = ctrl.family();
  REQUIRE(id);
  CHECK(id.value == GENL_ID_CTRL);
  const auto after_lookup = ctrl.requests();
  CHECK(after_lookup == 1);
  CHECK(ctrl.family().value == GENL_ID_CTRL);
  CHECK(ctrl.requests() == after_lookup);  // kept, not asked again
  // A request is built with the family's message type: the controller's own lookup of itself.
  std::uint16_t built_with = 0;
  auto reply = ctrl.request([&](std::uint16_t family) {
    built_with = family;
    return rdma::netlink::build_get_family("nlctrl");
  });
  REQUIRE(reply);
  CHECK(built_with == GENL_ID_CTRL);
  CHECK(rdma::netlink::decode_family_id(reply.value).value == GENL_ID_CTRL);
  CHECK(ctrl.requests() == after_lookup + 1);
}

TEST_CASE("GenlClient: a family the kernel lacks is kNotSupported, and nothing is built for it") {
  GenlClient none("rdma_no_such", std::chrono::seconds(10));
  CHECK(none.family().error == ReadError::kNotSupported);
  bool built = false;
  auto reply = none.request([&](std::uint16_t) {
    built = true;
    return std::vector<std::uint8_t>{};
  });
  CHECK(reply.error == ReadError::kNotSupported);
  CHECK_FALSE(built);
  CHECK(none.requests() == 2);  // a failed lookup is asked again
}
