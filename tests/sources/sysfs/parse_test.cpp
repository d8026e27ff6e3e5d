#include <catch2/catch.hpp>

#include "sources/sysfs/parse.h"

using namespace rdma::sysfs;

TEST_CASE("parse_u64 is exact over the whole unsigned 64-bit range") {
  CHECK(parse_u64("0\n") == 0u);
  CHECK(parse_u64("4294967295\n") == 4294967295u);
  CHECK(parse_u64("9007199254740993\n") == 9007199254740993ull);  // 2^53 + 1: not a double
  CHECK(parse_u64("18446744073709551615\n") == 18446744073709551615ull);
  CHECK_FALSE(parse_u64("18446744073709551616\n"));  // overflow
  CHECK_FALSE(parse_u64("-1\n"));
  CHECK_FALSE(parse_u64("0x10\n"));
  CHECK_FALSE(parse_u64("12 34\n"));
  CHECK_FALSE(parse_u64("\n"));
  CHECK_FALSE(parse_u64("N/A (no PMA)\n"));
  CHECK(is_not_available("N/A (no PMA)\n"));
}

TEST_CASE("hex and enum attributes") {
  CHECK(parse_hex_or_dec("0x226\n") == 0x226u);
  CHECK(parse_hex_or_dec("0xffff\n") == 0xffffu);
  CHECK(parse_hex_or_dec("1\n") == 1u);
  CHECK_FALSE(parse_hex_or_dec("0x\n"));
  auto e = parse_enum("4: ACTIVE\n");
  REQUIRE(e);
  CHECK(e->id == 4);
  CHECK(e->name == "ACTIVE");
  auto t = parse_enum("7: unspecified\n");
  REQUIRE(t);
  CHECK(t->id == 7);
  CHECK(t->name == "unspecified");
  CHECK_FALSE(parse_enum("ACTIVE\n"));
  CHECK_FALSE(parse_enum(": x\n"));
}

TEST_CASE("rate strings in every kernel format") {
  auto r = parse_rate("200 Gb/sec (4X HDR)\n");
  REQUIRE(r);
  CHECK(r->bytes_per_second == 25'000'000'000ull);
  CHECK(r->width == 4);
  CHECK(r->speed == "HDR");
  r = parse_rate("2.5 Gb/sec (1X SDR)\n");
  REQUIRE(r);
  CHECK(r->bytes_per_second == 312'500'000ull);
  CHECK(r->width == 1);
  r = parse_rate("10 Gb/sec (4X)\n");  // legacy SDR without a speed name
  REQUIRE(r);
  CHECK(r->bytes_per_second == 1'250'000'000ull);
  CHECK(r->speed.empty());
  r = parse_rate("800 Gb/sec (4X XDR)\n");
  REQUIRE(r);
  CHECK(r->bytes_per_second == 100'000'000'000ull);
  r = parse_rate("0 GB/sec\n");
  REQUIRE(r);
  CHECK(r->bytes_per_second == 0);
  CHECK_FALSE(parse_rate("fast\n"));
  CHECK_FALSE(parse_rate("10 Mb/sec\n"));
  CHECK_FALSE(parse_rate("2.55 Gb/sec (1X SDR)\n"));
  CHECK_FALSE(parse_rate("10 Gb/sec (4X HDR\n"));
}

TEST_CASE("GUIDs become canonical 0x strings") {
  CHECK(parse_guid("0c42:a103:0040:29a0\n") == std::string("0x0c42a103004029a0"));
  CHECK(parse_guid("0A7F:BC12:45EF:D23B") == std::string("0x0a7fbc1245efd23b"));  // no newline (procfs fixture)
  CHECK_FALSE(parse_guid("0c42:a103:0040\n"));
  CHECK_FALSE(parse_guid("0c42-a103-0040-29a0\n"));
  CHECK_FALSE(parse_guid("0c42:a103:0040:29ag\n"));
}

TEST_CASE("trim_value removes newlines, including mlx4's double newline") {
  CHECK(trim_value("InfiniBand\n\n") == "InfiniBand");
  CHECK(trim_value("\n").empty());
  CHECK(trim_value("") .empty());
}
