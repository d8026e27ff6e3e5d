// The topology plan's leaves from Kubernetes node labels (sources/cgroup/node_list.h): the
// NodeList as the API server answers it, hostile variants, and the plan built from it.
#include <catch2/catch.hpp>

#include "collectors/prober/engine/pinglist_plan.h"
#include "collectors/prober/node_leaves.h"
#include "sources/cgroup/node_list.h"

using namespace rdma;

namespace {
const std::vector<std::string> kKeys = {"network.topology.nvidia.com/leaf", "network.topology.nvidia.com/spine"};
std::string item(const std::string& name, const std::string& labels) {
  return R"({"metadata":{"name":")" + name + R"(","uid":"u","labels":{)" + labels + R"(}},"status":{"capacity":{"cpu":"8"}}})";
}
}  // namespace

TEST_CASE("node labels: leaf and spine per node, a node without labels read as absent") {
  const std::string doc = R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"tok-2"},"items":[)" +
                          item("gpu-001", R"("network.topology.nvidia.com/leaf":"leaf-a","network.topology.nvidia.com/spine":"s1")") + "," +
                          item("gpu-002", R"("network.topology.nvidia.com/leaf":"leaf-a","kubernetes.io/os":"linux")") + "," +
                          item("gpu-003", R"("network.topology.nvidia.com/leaf":"leaf-b")") + "," +
                          item("cpu-1", R"("kubernetes.io/os":"linux")") + "]}";
  cgroup::NodeList list;
  REQUIRE(cgroup::decode_node_list(doc, kKeys, list).empty());
  CHECK(list.next == "tok-2");
  REQUIRE(list.nodes.size() == 4);
  CHECK(list.nodes[0].name == "gpu-001");
  CHECK(list.nodes[0].values == std::vector<std::string>{"leaf-a", "s1"});
  CHECK(list.nodes[1].values == std::vector<std::string>{"leaf-a", ""});
  CHECK(list.nodes[3].values == std::vector<std::string>{"", ""});
  CHECK(list.dropped == 0);
  // The plan from the labels: a node without a leaf label is not in it (its state: not found).
  std::vector<std::pair<std::string, std::string>> members;
  for (const auto& n : list.nodes) members.emplace_back(n.name, n.values[0]);
  const auto f = collectors::prober::make_plan_fabric(members);
  CHECK(f.leaves.size() == 2);
  CHECK(f.nodes == 3);
  CHECK(collectors::prober::plan_pinglist(f, "", "gpu-002", 0, 0).local == 1);
  CHECK_FALSE(collectors::prober::plan_pinglist(f, "", "cpu-1", 0, 0).found);
}

TEST_CASE("node labels: hostile lists are refused or their bad parts dropped, with the reason") {
  cgroup::NodeList list;
  CHECK(cgroup::decode_node_list("[]", kKeys, list) == "not a JSON object");
  CHECK(cgroup::decode_node_list("{\"kind\":\"NodeList\",\"items\":[", kKeys, list) == "not a JSON object");
  CHECK(cgroup::decode_node_list(R"({"kind":"PodList","items":[]})", kKeys, list) == "kind is not NodeList");
  // A kind that is not a string is no NodeList (it once threw out of the decoder: found by fuzz_node_list).
  CHECK(cgroup::decode_node_list(R"({"kind":1,"items":[]})", kKeys, list) == "kind is not NodeList");
  CHECK(cgroup::decode_node_list(R"({"kind":null,"items":[]})", kKeys, list) == "kind is not NodeList");
  CHECK(cgroup::decode_node_list(R"({"kind":"Status","code":403,"message":"nodes is forbidden"})", kKeys, list) ==
        "API status 403: nodes is forbidden");
  CHECK(cgroup::decode_node_list(R"({"kind":"NodeList","items":{}})", kKeys, list) == "items is not a list");
  CHECK(cgroup::decode_node_list(std::string(70, '[') + std::string(70, ']'), kKeys, list) == "document nested deeper than 64");
  CHECK(cgroup::decode_node_list("{}", std::vector<std::string>(9, "k"), list) == "more than 8 label keys");
  // A name that is no DNS subdomain drops its item; a label value the API would refuse is absent.
  const std::string doc = R"({"kind":"NodeList","items":[)" + item("Bad_Name", "") + "," + item("ok", R"("network.topology.nvidia.com/leaf":"-x")") +
                          "," + item("ok2", R"("network.topology.nvidia.com/leaf":7)") + R"(,{"metadata":{}},3]})";
  REQUIRE(cgroup::decode_node_list(doc, kKeys, list).empty());
  REQUIRE(list.nodes.size() == 2);
  CHECK(list.nodes[0].values[0].empty());
  CHECK(list.nodes[1].values[0].empty());
  CHECK(list.dropped == 5);
  CHECK(cgroup::is_label_value("leaf.a-1_b"));
  CHECK_FALSE(cgroup::is_label_value(std::string(64, 'a')));
}

TEST_CASE("node labels: a label key as the API server admits it") {
  CHECK(cgroup::is_label_key("network.topology.nvidia.com/leaf"));
  CHECK(cgroup::is_label_key("topology.kubernetes.io/zone"));
  CHECK(cgroup::is_label_key("leaf"));
  CHECK_FALSE(cgroup::is_label_key(""));
  CHECK_FALSE(cgroup::is_label_key("example.com/"));          // no name
  CHECK_FALSE(cgroup::is_label_key("/leaf"));                 // an empty prefix
  CHECK_FALSE(cgroup::is_label_key("Example_Com/leaf"));      // a prefix that is no DNS subdomain
  CHECK_FALSE(cgroup::is_label_key("a/b/c"));                 // one '/' at most
  CHECK_FALSE(cgroup::is_label_key("leaf label"));
  CHECK_FALSE(cgroup::is_label_key(std::string(64, 'a')));  // a name over 63
}

TEST_CASE("node labels: a page of the labelled nodes asks by selector, limit and the last page's token") {
  using rdma::collectors::prober::node_page_url;
  CHECK(node_page_url("https://10.96.0.1:443/", "network.topology.nvidia.com/leaf", "") ==
        "https://10.96.0.1:443/api/v1/nodes?labelSelector=network.topology.nvidia.com%2Fleaf&limit=500");
  // A server's token is opaque: every byte outside the unreserved set is escaped, so it can add no parameter.
  CHECK(node_page_url("https://[fd00::1]:6443", "leaf", "eyJ2Ijo=&x=1") ==
        "https://[fd00::1]:6443/api/v1/nodes?labelSelector=leaf&limit=500&continue=eyJ2Ijo%3D%26x%3D1");
}
