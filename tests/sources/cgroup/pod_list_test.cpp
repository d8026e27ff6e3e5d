// The Kubernetes API's PodList JSON -> pod names (sources/cgroup/pod_list.h), on documents shaped
// as the API server writes them (core/v1 Pod, trimmed), and on hostile ones.
#include "sources/cgroup/pod_list.h"

#include <catch2/catch.hpp>
#include <string>

using rdma::cgroup::decode_pod_list;
using rdma::cgroup::PodList;

namespace {

const char* kList = R"({
  "kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "123456"},
  "items": [
    {"metadata": {"name": "llm-0", "generateName": "llm-", "namespace": "training",
                  "uid": "0d5e4c2b-3f1a-4b6c-9d8e-7f6a5b4c3d2e", "labels": {"name": "not-this"},
                  "ownerReferences": [{"name": "llm", "uid": "ffff0000-0000-4000-8000-000000000000"}]},
     "spec": {"nodeName": "gpu-07", "containers": [{"name": "spec-name-not-read", "image": "x"}],
              "initContainers": [{"name": "init"}]},
     "status": {"phase": "Running",
                "initContainerStatuses": [{"name": "setup", "containerID": "containerd://00aa"}],
                "containerStatuses": [
                  {"name": "worker", "containerID": "containerd://4f1c2d3e", "state": {"running": {}},
                   "lastState": {"terminated": {"containerID": "containerd://dead"}}},
                  {"name": "sidecar", "containerID": "cri-o://abcdef01"},
                  {"name": "waiting", "state": {"waiting": {"reason": "ContainerCreating"}}}],
                "ephemeralContainerStatuses": [{"name": "debugger", "containerID": "docker://0123"}]}},
    {"metadata": {"name": "kube-proxy-gpu-07", "namespace": "kube-system", "uid": "3c1f0c9e-1b2a",
                  "annotations": {"kubernetes.io/config.mirror": "6ea4c30a5f3b0a3b9b8e",
                                  "kubernetes.io/config.source": "file"}},
     "spec": {"nodeName": "gpu-07"}, "status": {}}
  ]})";

}  // namespace

TEST_CASE("pod list: names, UIDs, a static pod's mirror UID and every container status list") {
  PodList l;
  REQUIRE(decode_pod_list(kList, l).empty());
  REQUIRE(l.pods.size() == 2);
  const auto& p = l.pods[0];
  CHECK(p.uid == "0d5e4c2b-3f1a-4b6c-9d8e-7f6a5b4c3d2e");
  CHECK(p.name == "llm-0");
  CHECK(p.namespace_name == "training");
  CHECK(p.node == "gpu-07");
  CHECK(p.mirror_uid.empty());
  REQUIRE(p.containers.size() == 4);  // the waiting one has no ID yet
  CHECK(p.containers[0].id == "00aa");
  CHECK(p.containers[0].name == "setup");
  CHECK(p.containers[1].id == "4f1c2d3e");  // not lastState's ID
  CHECK(p.containers[1].name == "worker");
  CHECK(p.containers[2].id == "abcdef01");
  CHECK(p.containers[3].id == "0123");
  CHECK(p.containers[3].name == "debugger");
  CHECK(l.pods[1].mirror_uid == "6ea4c30a5f3b0a3b9b8e");
  CHECK(l.pods[1].name == "kube-proxy-gpu-07");
  CHECK(l.dropped == 0);
}

TEST_CASE("pod list: an API Status, another kind or no kind is an error") {
  PodList l;
  auto e = decode_pod_list(R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized",)"
                           R"("reason":"Unauthorized","code":401})",
                           l);
  CHECK(e == "the API answered a Status, code 401: Unauthorized");
  CHECK(decode_pod_list(R"({"kind":"NodeList","items":[]})", l) == "not a PodList (kind NodeList)");
  CHECK(decode_pod_list(R"({"items":[]})", l) == "not a PodList (no kind)");
  CHECK(decode_pod_list(R"({"kind":"PodList","items":[]})", l).empty());
  CHECK(l.pods.empty());
}

TEST_CASE("pod list: not JSON, not an object, truncated or not UTF-8 is rejected whole") {
  PodList l;
  for (std::string bad : {std::string(""), std::string("[]"), std::string("\"PodList\""), std::string("42"),
                          std::string("<html>"), std::string(R"({"kind":"PodList","items":[{"metadata":)"),
                          std::string("{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"\xff\xfe\","
                                      "\"uid\":\"u1\"}}]}"),
                          std::string(R"({"kind":"PodList","items":[{"metadata":{"name":"\ud800","uid":"u1"}}]})")}) {
    INFO(bad);
    CHECK_FALSE(decode_pod_list(bad, l).empty());
    CHECK(l.pods.empty());
  }
}

TEST_CASE("pod list: names the API server could not have written are dropped, the pod kept") {
  PodList l;
  REQUIRE(decode_pod_list(R"({"kind":"PodList","items":[
      {"metadata":{"name":"\u00ff-pod","namespace":"Upper","uid":"u-1"},"spec":{"nodeName":"n"},
       "status":{"containerStatuses":[{"name":"a\"b","containerID":"containerd://XYZ"},
                                      {"name":"ok","containerID":"containerd://ab"},
                                      {"name":"no-scheme","containerID":"ab"}]}},
      {"metadata":{"name":"no-uid","namespace":"ns"}},
      {"metadata":{"name":"bad-uid","namespace":"ns","uid":"a b"}}]})",
                          l)
              .empty());
  REQUIRE(l.pods.size() == 1);
  CHECK(l.pods[0].uid == "u-1");
  CHECK(l.pods[0].name.empty());
  CHECK(l.pods[0].namespace_name.empty());
  REQUIRE(l.pods[0].containers.size() == 1);
  CHECK(l.pods[0].containers[0].name == "ok");
  CHECK(l.dropped == 7);  // name, namespace, 2 container IDs, a container name, 2 pods without a valid UID
}

TEST_CASE("pod list: nesting and counts are bounded") {
  PodList l;
  std::string deep = R"({"kind":"PodList","x":)" + std::string(100, '[') + std::string(100, ']') + "}";
  CHECK(decode_pod_list(deep, l).find("nested deeper") != std::string::npos);
  std::string many = R"({"kind":"PodList","items":[)";
  for (std::size_t i = 0; i <= rdma::cgroup::kMaxPods; ++i) many += std::string(i ? "," : "") + R"({"metadata":{"uid":"u"}})";
  many += "]}";
  CHECK(decode_pod_list(many, l).find("more than") != std::string::npos);
  CHECK(l.pods.empty());
}

TEST_CASE("pod list: the name rules") {
  using rdma::cgroup::is_dns_label;
  using rdma::cgroup::is_dns_subdomain;
  using rdma::cgroup::is_utf8;
  CHECK(is_dns_label("a"));
  CHECK(is_dns_label("llm-0"));
  CHECK_FALSE(is_dns_label("-a"));
  CHECK_FALSE(is_dns_label("a-"));
  CHECK_FALSE(is_dns_label("A"));
  CHECK_FALSE(is_dns_label(std::string(64, 'a')));
  CHECK(is_dns_subdomain("gpu-07.rack-3.example"));
  CHECK_FALSE(is_dns_subdomain("a..b"));
  CHECK_FALSE(is_dns_subdomain(""));
  CHECK(is_utf8("plain"));
  CHECK(is_utf8("\xc3\xbf\xe2\x82\xac\xf0\x9f\x98\x80"));
  CHECK_FALSE(is_utf8("\xff"));
  CHECK_FALSE(is_utf8("\xc0\x80"));          // overlong
  CHECK_FALSE(is_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(is_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_utf8("\xe2\x82"));          // truncated
}
