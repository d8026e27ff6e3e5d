#include <catch2/catch.hpp>

#include <cerrno>
#include <string>

#include "sources/common/small_file.h"
#include "tests/lib/temp_tree.h"

using rdma::read_small_file;
using rdma::ReadError;

TEST_CASE("read_small_file reads a file whole up to its bound, and refuses a larger one whole") {
  rdma::testing::TempTree t("small_file");
  const std::string big(10000, 'x');  // over one 4 KiB read
  t.write("exact", big);
  t.write("empty", "");
  auto exact = read_small_file(t.root() + "/exact", big.size());
  REQUIRE(exact);
  CHECK(exact.value == big);
  auto over = read_small_file(t.root() + "/exact", big.size() - 1);
  CHECK_FALSE(over);
  CHECK(over.sys_errno == EFBIG);
  CHECK(over.value.empty());  // never a prefix
  auto empty = read_small_file(t.root() + "/empty", 0);
  REQUIRE(empty);
  CHECK(empty.value.empty());
  CHECK(read_small_file(t.root() + "/exact", 0).sys_errno == EFBIG);
}

TEST_CASE("read_small_file says why a file cannot be read") {
  rdma::testing::TempTree t("small_file");
  auto missing = read_small_file(t.root() + "/missing", 100);
  CHECK(missing.error == ReadError::kNotFound);
  CHECK(missing.sys_errno == ENOENT);
  auto dir = read_small_file(t.root(), 100);  // opens, but read() refuses a directory
  CHECK_FALSE(dir);
  CHECK(dir.sys_errno == EISDIR);
}
