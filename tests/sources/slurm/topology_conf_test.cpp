#include <catch2/catch.hpp>

#include "sources/slurm/topology_conf.h"

using namespace rdma::slurm;

namespace {
std::vector<std::string> expand(std::string_view s, std::size_t limit = 1000) {
  std::vector<std::string> out;
  std::string error;
  REQUIRE(expand_hostlist(s, out, limit, error));
  CHECK(error.empty());
  return out;
}
std::string fails(std::string_view s, std::size_t limit = 1000) {
  std::vector<std::string> out{"kept"};
  std::string error;
  CHECK_FALSE(expand_hostlist(s, out, limit, error));
  CHECK(out == std::vector<std::string>{"kept"});
  return error;
}
}  // namespace

TEST_CASE("slurm hostlist: ranges keep the lower bound's padding, lists and products expand") {
  CHECK(expand("node[001-003]") == std::vector<std::string>{"node001", "node002", "node003"});
  CHECK(expand("a[8-10],b07") == std::vector<std::string>{"a8", "a9", "a10", "b07"});
  CHECK(expand("n[1,3-4]") == std::vector<std::string>{"n1", "n3", "n4"});
  CHECK(expand("r[1-2]n[1-2]") == std::vector<std::string>{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand("host.example-1_a") == std::vector<std::string>{"host.example-1_a"});
}

TEST_CASE("slurm hostlist: malformed or oversized lists fail whole, with the reason") {
  CHECK(fails("n[1-") == "unclosed '[' in 'n[1-'");
  CHECK(fails("n]") == "']' without '['");
  CHECK(fails("n[a-b]") == "bad range 'a-b' (want N or N-M, digits)");
  CHECK(fails("n[5-1]") == "range '5-1' runs backwards");
  CHECK(fails("a,,b") == "empty name in hostlist");
  CHECK(fails("n[1-2000]").find("names more than") != std::string::npos);
  CHECK(fails("r[1-100]n[1-100]").find("names more than") != std::string::npos);
  CHECK(fails("a b") == "character ' ' not allowed in a name");
  CHECK(fails("n[1-9999999999]") == "bad range '1-9999999999' (want N or N-M, digits)");
}

TEST_CASE("slurm topology: block plugin lines, comments, CRLF, keys in any case") {
  const auto t = parse_topology_conf("BlockName=b1 Nodes=n[1-2]\r\nBLOCKNAME=b2 NODES=n3 # tail\nBlockSizes=2,4\n");
  CHECK(t.errors.empty());
  REQUIRE(t.nodes.size() == 3);
  CHECK(t.nodes[2].node == "n3");
  CHECK(t.nodes[2].leaf == "b2");
  CHECK(t.nodes[2].spine.empty());
  const auto bad = parse_topology_conf("SwitchName=s1 Nodes\nSwitchName=a,b\n");
  REQUIRE(bad.errors.size() == 2);
  CHECK(bad.errors[0].line == 1);
  CHECK(bad.errors[0].message == "'Nodes' is not Key=Value");
  CHECK(bad.errors[1].line == 2);
}
