// The Kubernetes API client's pure parts (collectors/workload/kube_names.h): the pod-list URL and
// the snapshot a decoded list gives.
#include "collectors/workload/kube_names.h"

#include <catch2/catch.hpp>

using rdma::collectors::workload::names_of;
using rdma::collectors::workload::pod_list_url;

TEST_CASE("kubernetes: the pod list URL selects this node, from the API server's cache") {
  CHECK(pod_list_url("https://10.96.0.1:443", "gpu-07.rack-3") ==
        "https://10.96.0.1:443/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-07.rack-3&resourceVersion=0");
  CHECK(pod_list_url("https://[fd00::1]:6443/", "a&b=c") ==
        "https://[fd00::1]:6443/api/v1/pods?fieldSelector=spec.nodeName%3Da%26b%3Dc&resourceVersion=0");
}

TEST_CASE("kubernetes: the snapshot names this node's pods and containers, a static pod by its kubelet UID") {
  rdma::cgroup::PodList list;
  list.pods.push_back({"uid-a", "", "training", "llm-0", "n1", {{"c1", "worker"}, {"c2", ""}}});
  list.pods.push_back({"mirror-uid", "static-uid", "kube-system", "etcd-n1", "n1", {{"c3", "etcd"}}});
  list.pods.push_back({"uid-b", "", "training", "elsewhere", "n2", {{"c4", "worker"}}});
  auto s = names_of(list, "n1");
  REQUIRE(s->pods.size() == 3);  // uid-a, mirror-uid, static-uid
  CHECK(s->pods.at("uid-a").pod == "llm-0");
  CHECK(s->pods.at("static-uid").pod == "etcd-n1");
  CHECK(s->pods.at("mirror-uid").pod_namespace == "kube-system");
  CHECK(s->pods.count("uid-b") == 0);
  REQUIRE(s->containers.size() == 3);
  CHECK(s->containers.at("c1").container == "worker");
  CHECK(s->containers.at("c1").pod_uid == "uid-a");
  CHECK(s->containers.at("c2").container.empty());
  CHECK(s->containers.at("c3").pod_uid == "static-uid");
  CHECK(s->containers.count("c4") == 0);
}
