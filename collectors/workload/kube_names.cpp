#include "collectors/workload/kube_names.h"

#include "exporter/thread.h"

#include <algorithm>

namespace rdma::collectors::workload {

std::string pod_list_url(const std::string& api, const std::string& node) {
  // resourceVersion=0: served from the API server's cache, no quorum read of etcd per node.
  return exporter::kube::url_of(
      api, "/api/v1/pods?fieldSelector=spec.nodeName%3D" + exporter::kube::query_value(node) + "&resourceVersion=0");
}

std::shared_ptr<const KubeNamesSnapshot> names_of(const cgroup::PodList& list, const std::string& node) {
  auto s = std::make_shared<KubeNamesSnapshot>();
  for (const auto& p : list.pods) {
    if (p.node != node) continue;
    ::rdma::workload::ContainerName pod{"", p.uid, p.namespace_name, p.name, ""};
    s->pods[p.uid] = pod;
    if (!p.mirror_uid.empty()) s->pods[p.mirror_uid] = pod;
    // The cgroups carry the UID the kubelet runs the pod under: a static pod's own.
    const std::string& run_uid = p.mirror_uid.empty() ? p.uid : p.mirror_uid;
    for (const auto& c : p.containers) s->containers[c.id] = {c.id, run_uid, p.namespace_name, p.name, c.name};
  }
  return s;
}

KubeNames::KubeNames(KubeConfig config, const exporter::kube::KubeApi& api) : config_(std::move(config)), api_(api) {}

KubeNames::~KubeNames() { stop(); }

void KubeNames::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = exporter::named_thread("kube-names", [this] { run(); });
}

void KubeNames::stop() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KubeNames::refresh_soon() {
  {
    std::lock_guard l(mu_);
    if (soon_) return;
    soon_ = true;
  }
  wake_.notify_all();
}

KubeNames::State KubeNames::take() {
  std::lock_guard l(mu_);
  State s = state_;
  state_.failures.clear();
  return s;
}

void KubeNames::run() {
  std::optional<Clock::time_point> last_early;
  while (!stopping_) {
    list_once();
    const auto last = Clock::now();
    std::unique_lock l(mu_);
    while (!stopping_) {
      const auto now = Clock::now();
      if (now >= last + config_.period) break;
      // An early list: asked for, kMinGap after the last one, and at most one per period.
      const auto gap = std::min<Clock::duration>(kMinGap, config_.period);
      const auto early_at = std::max(last + gap, last_early ? *last_early + config_.period : last);
      if (soon_ && now >= early_at) {
        last_early = now;
        break;
      }
      wake_.wait_until(l, soon_ ? std::min(early_at, last + config_.period) : last + config_.period);
    }
    soon_ = false;
  }
}

void KubeNames::failed(std::string reason, std::string cause, std::string message, bool answered) {
  std::lock_guard l(mu_);
  auto& f = state_.failures[{std::move(reason), std::move(cause)}];
  f.message = std::move(message);
  ++f.count;
  if (answered) {  // it answered, wrongly: reachable, and the error is counted, not state
    state_.reachable = true;
    state_.unreachable_why.clear();
  }
}

void KubeNames::unreachable(std::string why) {
  std::lock_guard l(mu_);
  state_.reachable = false;
  state_.unreachable_why = std::move(why);
}

void KubeNames::list_once() {
  using Outcome = exporter::kube::Answer::Outcome;
  exporter::kube::Request request;
  request.url = pod_list_url(config_.endpoint.api, config_.node);
  request.what = "listing the pods of node " + config_.node;
  request.permission = "get/list/watch pods";
  request.max_bytes = kMaxListBytes;
  request.cancel = &stopping_;
  auto answer = exporter::kube::get(api_, config_.endpoint, request);
  switch (answer.outcome) {
    case Outcome::kCancelled:
      return;
    case Outcome::kUnreachable:
      unreachable(std::move(answer.message));
      return;
    case Outcome::kFailed: {
      // No token: nothing was asked, so nothing is known of the API's reachability.
      const bool answered = answer.reason != "kubernetes_token";
      if (!answered) answer.message += "; pod series keep their IDs only";
      failed(std::move(answer.reason), std::move(answer.cause), std::move(answer.message), answered);
      return;
    }
    case Outcome::kOk:
      break;
  }
  cgroup::PodList list;
  if (auto err = cgroup::decode_pod_list(answer.body, list); !err.empty()) {
    failed("kubernetes_decode", "json", "Kubernetes API " + config_.endpoint.api + ": the pod list: " + err);
    return;
  }
  auto names = names_of(list, config_.node);
  std::lock_guard l(mu_);
  state_.pods = static_cast<std::uint64_t>(
      std::count_if(list.pods.begin(), list.pods.end(), [&](const auto& p) { return p.node == config_.node; }));
  state_.names = std::move(names);
  state_.reachable = true;
  state_.unreachable_why.clear();
}

}  // namespace rdma::collectors::workload
