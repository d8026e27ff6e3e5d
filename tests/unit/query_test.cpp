#include <catch2/catch.hpp>

#include "exporter/query.h"

using namespace rdma::exporter;

TEST_CASE("percent_decode: escapes, plus, broken escapes") {
  CHECK(percent_decode("a%2Cb+c") == std::optional<std::string>("a,b c"));
  CHECK(percent_decode("%5Bfe80%3a%3A1%5D") == std::optional<std::string>("[fe80::1]"));
  CHECK(percent_decode("") == std::optional<std::string>(""));
  CHECK(percent_decode("%00") == std::optional<std::string>(std::string(1, '\0')));
  CHECK_FALSE(percent_decode("%"));
  CHECK_FALSE(percent_decode("x%2"));
  CHECK_FALSE(percent_decode("%zz"));
  CHECK_FALSE(percent_decode("%-1"));
}

TEST_CASE("parse_query: one policy for every extra path") {
  std::string err;
  auto q = parse_query("target=0x1&ports=1%2C2&", {"target", "ports"}, err);
  REQUIRE(q);
  CHECK(*q->get("target") == "0x1");
  CHECK(*q->get("ports") == "1,2");
  CHECK_FALSE(q->has("module"));
  q = parse_query("", {"target"}, err);
  REQUIRE(q);
  CHECK(q->all().empty());
  q = parse_query("target", {"target"}, err);  // a name without `=`: an empty value
  REQUIRE(q);
  CHECK(q->get("target")->empty());

  auto fails = [](std::string_view query, const std::string& msg) {
    std::string e;
    CHECK_FALSE(parse_query(query, {"target", "ports"}, e));
    CHECK_THAT(e, Catch::Contains(msg));
    CHECK(e.find('\n') == std::string::npos);
  };
  fails("target=a&target=b", "parameter `target` given twice");
  fails("target=a&tar%67et=b", "given twice");  // decoded before it is compared
  fails("target=a&debug=1", "unknown parameter `debug` (target, ports)");
  fails("target=a%0A&x%0Ay=1", "unknown parameter `x?y`");  // a caller's bytes never break the line
  fails("target=%zz", "malformed percent-encoding in parameter `target`");
  fails("target=" + std::string(kMaxQueryValue + 1, 'x'), "longer than 1024 bytes");
}

TEST_CASE("parse_query: a path that takes no parameter refuses every one") {
  std::string e;
  CHECK(parse_query("", {}, e));
  CHECK(parse_query("&&", {}, e));
  CHECK_FALSE(parse_query("refresh=1", {}, e));
  CHECK(e == "unknown parameter `refresh` (this path takes none)");
}

TEST_CASE("query_number and query_guid: the whole value or nothing") {
  CHECK(query_number("1", 1, 254) == 1u);
  CHECK(query_number("254", 1, 254) == 254u);
  CHECK(query_number("0254", 1, 254) == 254u);
  CHECK_FALSE(query_number("0", 1, 254));
  CHECK_FALSE(query_number("255", 1, 254));
  CHECK_FALSE(query_number("", 1, 254));
  CHECK_FALSE(query_number("+1", 1, 254));
  CHECK_FALSE(query_number("-1", 0, 254));
  CHECK_FALSE(query_number(" 1", 1, 254));
  CHECK_FALSE(query_number("1 ", 1, 254));
  CHECK_FALSE(query_number("1x", 1, 254));
  CHECK_FALSE(query_number("0x1", 0, 254));
  CHECK(query_number("18446744073709551615", 0, ~0ull) == ~0ull);
  CHECK_FALSE(query_number("18446744073709551616", 0, ~0ull));  // over 64 bits, not wrapped

  CHECK(query_guid("0x0002c90300a1b2c3") == 0x0002c90300a1b2c3ull);
  CHECK(query_guid("0XFFFFFFFFFFFFFFFF") == ~0ull);
  CHECK(query_guid("0x1") == 1u);
  CHECK_FALSE(query_guid("0x"));
  CHECK_FALSE(query_guid("0x00000000000000001"));  // 17 digits
  CHECK_FALSE(query_guid("0002c90300a1b2c3"));      // no prefix
  CHECK_FALSE(query_guid("0x-1"));
  CHECK_FALSE(query_guid("0x1g"));
  CHECK_FALSE(query_guid("0x 1"));
}

TEST_CASE("bad_request: 400 with one line") {
  const auto r = bad_request("no\nsuch\rthing");
  CHECK(r.status == 400);
  CHECK(r.content_type == "text/plain; charset=utf-8");
  CHECK(r.body == "no such thing\n");
}

TEST_CASE("refuse_unauthenticated: the one access rule of /probe and /pma/routes") {
  RequestIdentity anonymous, user, cert;
  user.basic_auth_user = "prometheus";
  cert.client_cert_verified = true;
  auto r = refuse_unauthenticated(anonymous, false, "routes", "collectors.pma.fabric_routes_allow_unauthenticated");
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK(r->body ==
        "routes refused: needs basic auth or a verified client certificate (--web.config.file), or "
        "collectors.pma.fabric_routes_allow_unauthenticated: true\n");
  CHECK_FALSE(refuse_unauthenticated(user, false, "routes", "x"));
  CHECK_FALSE(refuse_unauthenticated(cert, false, "routes", "x"));
  CHECK_FALSE(refuse_unauthenticated(anonymous, true, "routes", "x"));  // the operator's choice
}
