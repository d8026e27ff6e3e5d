#include "collectors/workload/kube_names.h"

#include "exporter/thread.h"

#include <algorithm>
#include <fstream>
#include <iterator>

namespace rdma::collectors::workload {
namespace {

// The token as the header carries it, or an error. A token is printable ASCII without spaces
// (a JWT); anything else (a CR/LF would add a header) is refused.
std::string read_token(const std::string& path, std::string& token) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "cannot read " + path;
  std::string text;
  text.resize(kMaxTokenBytes + 1);
  f.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(f.gcount()));
  if (text.size() > kMaxTokenBytes) return path + " is larger than " + std::to_string(kMaxTokenBytes) + " bytes";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) return path + " is empty";
  for (char c : text)
    if (c < 0x21 || c > 0x7e) return path + " holds characters a bearer token cannot have";
  token = std::move(text);
  return {};
}

}  // namespace

std::string pod_list_url(const std::string& api, const std::string& node) {
  std::string base = api;
  while (!base.empty() && base.back() == '/') base.pop_back();
  std::string url = base + "/api/v1/pods?fieldSelector=spec.nodeName%3D";
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : node) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      url += static_cast<char>(c);
    } else {
      url += '%';
      url += kHex[c >> 4];
      url += kHex[c & 15];
    }
  }
  // resourceVersion=0: served from the API server's cache, no quorum read of etcd per node.
  return url + "&resourceVersion=0";
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

KubeNames::KubeNames(KubeConfig config, const ::rdma::workload::KubeApi& api) : config_(std::move(config)), api_(api) {}

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
  using Fail = ::rdma::workload::HttpsReply::Failure;
  ::rdma::workload::HttpsGet get;
  if (auto err = read_token(config_.token_file, get.bearer_token); !err.empty()) {
    failed("kubernetes_token", config_.token_file, "Kubernetes API: " + err + "; pod series keep their IDs only", false);
    return;
  }
  get.url = pod_list_url(config_.api, config_.node);
  get.ca_file = config_.ca_file;
  get.max_bytes = kMaxListBytes;
  get.cancel = &stopping_;
  const auto reply = api_.get(get);
  const std::string where = "Kubernetes API " + config_.api + ": ";
  switch (reply.failure) {
    case Fail::kNone:
      break;
    case Fail::kCancelled:
      return;
    case Fail::kTls:
      failed("kubernetes_tls", config_.api, where + reply.error + " (CA file " + config_.ca_file + ")");
      return;
    case Fail::kTooLarge:
      failed("kubernetes_decode", "size", where + reply.error);
      return;
    default:
      unreachable(where + reply.error);
      return;
  }
  if (reply.status == 401 || reply.status == 403) {
    failed("kubernetes_auth", std::to_string(reply.status),
           where + "HTTP " + std::to_string(reply.status) + " listing the pods of node " + config_.node +
               (reply.status == 401 ? " (the service account token is not accepted)"
                                    : " (the service account may not list pods: ClusterRole get/list/watch pods)"));
    return;
  }
  if (reply.status != 200) {
    failed("kubernetes_http", std::to_string(reply.status),
           where + "HTTP " + std::to_string(reply.status) + " listing the pods of node " + config_.node);
    return;
  }
  cgroup::PodList list;
  if (auto err = cgroup::decode_pod_list(reply.body, list); !err.empty()) {
    failed("kubernetes_decode", "json", where + "the pod list: " + err);
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
