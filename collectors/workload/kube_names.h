#pragma once
// Pod and container names from the Kubernetes API, for the workload collector's pod series: a
// background thread lists the pods of this node (GET /api/v1/pods?fieldSelector=spec.nodeName=
// <node>&resourceVersion=0, served from the API server's watch cache) with the service account's
// token, every `period` and, when a scrape meets a pod it does not know, once early (at most once
// per period, never sooner than kMinGap, or the period if shorter, after the last list). Each list
// replaces an immutable snapshot; a scrape only copies the pointer out, never waits on the API. A failed list keeps the
// last good snapshot (a pod's name never changes for its UID).
//
// Needs only read access to pods (RBAC get/list/watch on pods); the request itself and what its
// failures count as are exporter/kube/kube_client.h's.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "exporter/kube/kube_client.h"
#include "collectors/workload/module/workload_api.h"
#include "sources/cgroup/pod_list.h"

namespace rdma::collectors::workload {

struct KubeConfig {
  exporter::kube::Endpoint endpoint;
  std::string node;
  std::chrono::milliseconds period{30000};
};

// A list's body is cut off beyond this (a node's pods are a few MiB at most).
inline constexpr std::size_t kMaxListBytes = 32u << 20;
inline constexpr std::chrono::seconds kMinGap{5};

// The names one list found, by pod UID (and a static pod's kubelet UID) and by container ID.
struct KubeNamesSnapshot {
  std::unordered_map<std::string, ::rdma::workload::ContainerName> pods;
  std::unordered_map<std::string, ::rdma::workload::ContainerName> containers;
};

// Builds the snapshot of one decoded list: the pods on `node` only (a server that ignored the
// field selector does not name another node's pods).
std::shared_ptr<const KubeNamesSnapshot> names_of(const cgroup::PodList& list, const std::string& node);

// The URL of the pod list of `node` under `api` (node percent-encoded).
std::string pod_list_url(const std::string& api, const std::string& node);

class KubeNames {
 public:
  // One failure cause since the last take(): reason (the errors_total label), the cause it is
  // logged once for, a message and how often.
  struct Failure {
    std::string message;
    std::uint64_t count = 0;
  };
  struct State {
    std::shared_ptr<const KubeNamesSnapshot> names;  // null before the first good list
    std::optional<bool> reachable;  // the API answered the last list (any HTTP status); unset: not tried yet
    std::string unreachable_why;
    std::uint64_t pods = 0;  // in the last good list
    std::map<std::pair<std::string, std::string>, Failure> failures;  // (reason, cause) -> since the last take
  };

  KubeNames(KubeConfig config, const exporter::kube::KubeApi& api);
  ~KubeNames();
  KubeNames(const KubeNames&) = delete;
  KubeNames& operator=(const KubeNames&) = delete;

  void start();
  void stop();  // returns within about a second, even with a list in flight
  // A scrape met a pod or container the snapshot does not name.
  void refresh_soon();
  // The snapshot, reachability and the failures since the last call (which it clears).
  State take();

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void list_once();
  void failed(std::string reason, std::string cause, std::string message, bool answered = true);
  void unreachable(std::string why);

  KubeConfig config_;
  const exporter::kube::KubeApi& api_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  bool soon_ = false;
  State state_;
};

}  // namespace rdma::collectors::workload
