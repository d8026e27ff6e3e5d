// workload: which pod, container, Slurm job/step or systemd unit holds queue pairs on each RDMA
// device and port. Per scrape: one RDMA netlink RES_QP_GET dump per device (the kernel's
// resource tracker: QP number, port, owner PID or kernel module), one RES_GET dump for the
// devices' resource counts, and one read of <procfs>/<pid>/cgroup per distinct owner PID,
// classified by sources/cgroup. Nothing about QPs or processes is cached across scrapes, so a
// process that exits takes its series with it at the next scrape.
//
// Names (setting `names`; auto: the CRI when its socket is set, else the Kubernetes API when the
// exporter runs in a cluster and knows its node):
//   Kubernetes API (kube_names.h, through the dlopen()ed HTTPS module, exporter/kube/kube_client.h): the pods
//     of this node listed in the background with the service account's token (read-only RBAC on
//     pods); a scrape copies the last snapshot.
// Names and allocations over the node's sockets (optional, each behind a socket setting, through
// the dlopen()ed gRPC module, module/workload_api.h):
//   CRI runtime.v1 ListPodSandbox + ListContainers (containerd/CRI-O socket): namespace, pod and
//     container names for the cgroups' pod UIDs and container IDs. Cached; listed again only when
//     a scrape meets an unknown ID, at most once per refresh-interval. Opt-in: the socket serves the
//     runtime's whole API (docs/security.md).
//   kubelet PodResources v1 List: each container's devices per resource, mapped to RDMA devices
//     (SR-IOV VFs by PCI address, device_ids.h); listed at most once per refresh-interval.
//
// The kernel lists a user QP only when its owner has a PID in the reader's PID namespace, and
// kernel QPs only to a reader in the initial one (rdma_is_visible_in_pid_ns): in a container the
// exporter needs the host's PID namespace (hostPID) and the host's /proc (--path.procfs), or it
// sees only its own namespace's QPs.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "collectors/workload/device_ids.h"
#include "collectors/workload/kube_names.h"
#include "exporter/kube/kube_client.h"
#include "collectors/workload/module/workload_api.h"
#include "exporter/collector.h"
#include "sources/cgroup/workload_path.h"
#include "sources/netlink/rdma_client.h"
#include "sources/sysfs/reader.h"

namespace rdma::collectors::workload {
namespace {

using cgroup::Workload;
using cgroup::WorkloadKind;
using exporter::Labels;
using exporter::MetricSink;

constexpr const char* kPodHelp =
    "Queue pairs held by processes of a Kubernetes pod's container (pod UID and container ID from the process's "
    "cgroup; namespace, pod and container names from the Kubernetes API or the CRI, else empty), by device and port "
    "(port 0: not bound yet).";
constexpr const char* kAllocationHelp =
    "RDMA devices allocated to a container by a device plugin (kubelet PodResources API): SR-IOV VFs by PCI "
    "address, or devices named as such; always 1.";
constexpr const char* kSlurmHelp =
    "Queue pairs held by processes of a Slurm job step (from slurmstepd's cgroup), by device and port (port 0: not "
    "bound yet).";
constexpr const char* kUnitHelp =
    "Queue pairs held by processes of a systemd unit that is neither a pod nor a Slurm job, by device and port "
    "(port 0: not bound yet).";
constexpr const char* kUnattributedHelp =
    "User queue pairs whose owner is unknown: no PID (a zombie owner), the process is gone, or its cgroup names "
    "no pod, job or unit; by device and port (port 0: not bound yet).";
constexpr const char* kKernelHelp =
    "Queue pairs owned by the kernel (owner: the kernel module, e.g. ib_core for QP0/QP1, rdma_cm, ib_ipoib), by "
    "device and port (port 0: not bound yet).";
constexpr const char* kApiUpHelp =
    "Whether the Kubernetes API answered the last list of this node's pods (1), or could not be reached (0); "
    "only when the workload collector takes its names from the API.";
constexpr const char* kApiPodsHelp = "Pods of this node in the last good list from the Kubernetes API.";
constexpr const char* kResourcesHelp =
    "Resources the kernel's RDMA resource tracker counts on a device (qp, cq, mr, pd, cm_id, ctx, srq), user and "
    "kernel together.";

// One series: device, port and the workload's labels, in the order they are emitted.
struct Key {
  WorkloadKind kind;
  std::string device;
  std::string port;
  std::string a, b;  // pod_uid/container_id, job/step, unit, kernel owner
  auto tie() const { return std::tie(kind, device, port, a, b); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};
constexpr WorkloadKind kKernel = static_cast<WorkloadKind>(0xff);

enum class NamesFrom { kNone, kCri, kKubernetes };

struct Settings {
  std::string procfs;
  NamesFrom names = NamesFrom::kNone;
  KubeConfig kube;                  // names == kKubernetes
  std::string cri_socket;           // names == kCri
  std::string podresources_socket;  // empty: no allocations
  std::chrono::milliseconds refresh{30000};
};

// Bounds each gRPC call: three of them (CRI x2, PodResources) stay well within the default 10 s
// scrape timeout when a socket hangs.
constexpr int kCallTimeoutMs = 2000;

class WorkloadCollector final : public exporter::Collector {
 public:
  using Clock = std::chrono::steady_clock;

  explicit WorkloadCollector(Settings s) : s_(std::move(s)) {
    if (s_.names == NamesFrom::kCri || !s_.podresources_socket.empty()) api_ = &::rdma::workload::workload_api();
    if (s_.names == NamesFrom::kKubernetes) kube_ = std::make_unique<KubeNames>(s_.kube, exporter::kube::kube_api());
  }

  void start() override {
    if (kube_) kube_->start();
  }
  void stop() override {
    if (kube_) kube_->stop();
  }

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    if (kube_) kube_state(ctx, out);
    if (!s_.podresources_socket.empty()) allocations(ctx, out);
    if (ctx.host.devices.empty()) return;
    if (!client_) {
      int err = 0;
      // A kernel that never answers must not hold the collector forever (as hw_counters).
      client_ = netlink::Client::open(std::chrono::seconds(10), err);
      // A kernel without RDMA netlink (ib_core not loaded: EPROTONOSUPPORT) has no queue pairs to
      // list: the host's state, logged once, asked again next scrape. Any other failure is an error.
      const bool absent = !client_ && (err == EPROTONOSUPPORT || err == ENOENT);
      if (client_ || absent)
        ctx.errors.capability("rdma_netlink", "socket", client_ != nullptr,
                              std::string("RDMA netlink socket: ") + std::strerror(err) + "; no queue-pair series");
      if (!client_) {
        if (!absent)
          ctx.errors.report("netlink", "open",
                            std::string("RDMA netlink socket: ") + std::strerror(err) + "; no queue-pair series");
        return;
      }
    }
    resources(ctx, out);
    std::map<Key, std::uint64_t> qps;
    std::unordered_map<std::uint32_t, Workload> owners;  // this scrape's PIDs
    for (const auto& dev : ctx.host.devices) {
      auto r = client_->read_qps(dev.name);
      if (r.error != 0) {
        ctx.errors.report("netlink", dev.name,
                          "RDMA netlink RES_QP_GET for " + dev.name + " failed (" + std::strerror(r.error) + ")");
        continue;
      }
      for (const auto& q : r.qps) {
        Key k{WorkloadKind::kNone, dev.name, std::to_string(q.port), {}, {}};
        if (q.kernel()) {
          k.kind = kKernel;
          k.a = q.kern_name;
        } else if (q.pid != 0) {
          auto it = owners.find(q.pid);
          if (it == owners.end()) it = owners.emplace(q.pid, owner(ctx, q.pid)).first;
          const Workload& w = it->second;
          k.kind = w.kind;
          if (w.kind == WorkloadKind::kPod) k.a = w.pod_uid, k.b = w.container_id;
          else if (w.kind == WorkloadKind::kSlurm) k.a = w.job, k.b = w.step;
          else if (w.kind == WorkloadKind::kUnit) k.a = w.unit;
        }
        ++qps[k];
      }
    }
    if (s_.names == NamesFrom::kCri) resolve_names(ctx, qps);
    if (kube_ && std::any_of(qps.begin(), qps.end(), [&](const auto& q) {
          return q.first.kind == WorkloadKind::kPod && !find_name(q.first.a, q.first.b);
        }))
      kube_->refresh_soon();
    for (const auto& [k, n] : qps) {
      Labels l{{"device", k.device}, {"port", k.port}};
      switch (k.kind) {
        case WorkloadKind::kPod: {
          const ::rdma::workload::ContainerName* name = find_name(k.a, k.b);
          l.emplace_back("pod_uid", k.a);
          l.emplace_back("container_id", k.b);
          l.emplace_back("namespace", name ? name->pod_namespace : "");
          l.emplace_back("pod", name ? name->pod : "");
          l.emplace_back("container", name ? name->container : "");
          out.gauge_u64("rdma_workload_pod_qps", kPodHelp, std::move(l), n);
          break;
        }
        case WorkloadKind::kSlurm:
          l.emplace_back("job", k.a);
          l.emplace_back("step", k.b);
          out.gauge_u64("rdma_workload_slurm_qps", kSlurmHelp, std::move(l), n);
          break;
        case WorkloadKind::kUnit:
          l.emplace_back("unit", k.a);
          out.gauge_u64("rdma_workload_unit_qps", kUnitHelp, std::move(l), n);
          break;
        case WorkloadKind::kNone:
          out.gauge_u64("rdma_workload_unattributed_qps", kUnattributedHelp, std::move(l), n);
          break;
        default:
          l.emplace_back("owner", k.a);
          out.gauge_u64("rdma_workload_kernel_qps", kKernelHelp, std::move(l), n);
      }
    }
  }

 private:
  Workload owner(const exporter::ScrapeContext& ctx, std::uint32_t pid) {
    const std::string path = s_.procfs + "/" + std::to_string(pid) + "/cgroup";
    auto text = sysfs::read_file(path);
    // A process that exited since the dump is not an error: its QPs are gone at the next one.
    if (!text) {
      if (text.error != ReadError::kNotFound) ctx.errors.report_read(text.error, path);
      return {};
    }
    return cgroup::parse_proc_cgroup(text.value);
  }

  void resources(const exporter::ScrapeContext& ctx, MetricSink& out) {
    auto r = client_->read_resources();
    if (r.error != 0) {
      ctx.errors.report("netlink", "RES_GET", std::string("RDMA netlink RES_GET failed (") + std::strerror(r.error) + ")");
      return;
    }
    for (const auto& dev : ctx.host.devices)
      for (const auto& s : r.devices)
        if (s.dev_name == dev.name)
          for (const auto& [name, n] : s.counts)
            out.gauge_u64("rdma_device_resources", kResourcesHelp, {{"device", dev.name}, {"resource", name}}, n);
  }

  // A container's names by its ID; a pod-level process's (no container ID) by the pod UID.
  const ::rdma::workload::ContainerName* find_name(const std::string& pod_uid, const std::string& container_id) const {
    const auto& containers = kube_names_ ? kube_names_->containers : containers_;
    const auto& pods = kube_names_ ? kube_names_->pods : pods_;
    if (!container_id.empty()) {
      auto it = containers.find(container_id);
      return it == containers.end() ? nullptr : &it->second;
    }
    auto it = pods.find(pod_uid);
    return it == pods.end() ? nullptr : &it->second;
  }

  // This scrape's snapshot of the API's names, its failures since the last scrape (counted and
  // logged once per cause) and whether the API is reachable (state: a gauge and one log line).
  void kube_state(const exporter::ScrapeContext& ctx, MetricSink& out) {
    auto st = kube_->take();
    kube_names_ = st.names ? st.names : std::make_shared<const KubeNamesSnapshot>();
    for (const auto& [key, f] : st.failures)
      for (std::uint64_t i = 0; i < f.count; ++i) ctx.errors.report(key.first, key.second, f.message);
    if (st.reachable) {
      ctx.errors.capability("kubernetes_api", s_.kube.endpoint.api, *st.reachable,
                            st.unreachable_why + "; pod series keep their IDs, with the names of the last good list");
      out.gauge("rdma_workload_kubernetes_api_up", kApiUpHelp, {}, *st.reachable ? 1 : 0);
    }
    out.gauge_u64("rdma_workload_kubernetes_pods", kApiPodsHelp, {}, st.pods);
  }

  bool due(const std::optional<Clock::time_point>& last) const { return !last || Clock::now() - *last >= s_.refresh; }

  // Lists the CRI again when this scrape met an ID the cache does not know, at most once per
  // refresh interval (a container that started since, or one the runtime does not know).
  void resolve_names(const exporter::ScrapeContext& ctx, const std::map<Key, std::uint64_t>& qps) {
    bool unknown = false;
    for (const auto& [k, n] : qps) unknown = unknown || (k.kind == WorkloadKind::kPod && !find_name(k.a, k.b));
    if (!unknown || !due(cri_listed_)) return;
    cri_listed_ = Clock::now();
    auto listing = api_->cri_list(s_.cri_socket, kCallTimeoutMs);
    if (!listing.error.empty()) {
      ctx.errors.report("cri", s_.cri_socket, "CRI " + listing.error + "; pod series keep their IDs, without names");
      return;
    }
    containers_.clear();
    pods_.clear();
    for (auto& n : listing.names) {
      if (n.container_id.empty()) pods_[n.pod_uid] = n;
      else containers_[n.container_id] = n;
    }
  }

  void allocations(const exporter::ScrapeContext& ctx, MetricSink& out) {
    if (due(podresources_listed_)) {
      podresources_listed_ = Clock::now();
      auto listing = api_->podresources_list(s_.podresources_socket, kCallTimeoutMs);
      allocations_.clear();
      if (!listing.error.empty())
        ctx.errors.report("podresources", s_.podresources_socket, "kubelet " + listing.error + "; no allocation series");
      else
        allocations_ = std::move(listing.allocations);
    }
    std::set<Labels> seen;
    for (const auto& a : allocations_)
      for (const auto& id : a.device_ids)
        for (auto& dev : rdma_devices_of(ctx.host, id)) {
          Labels l{{"device", std::move(dev)}, {"namespace", a.pod_namespace}, {"pod", a.pod},
                   {"container", a.container}, {"resource", a.resource}};
          if (seen.insert(l).second) out.info("rdma_device_allocation_info", kAllocationHelp, std::move(l));
        }
  }

  Settings s_;
  const ::rdma::workload::WorkloadApi* api_ = nullptr;
  std::unique_ptr<KubeNames> kube_;
  std::shared_ptr<const KubeNamesSnapshot> kube_names_;  // this scrape's
  std::unique_ptr<netlink::Client> client_;
  std::unordered_map<std::string, ::rdma::workload::ContainerName> containers_;  // by container ID
  std::unordered_map<std::string, ::rdma::workload::ContainerName> pods_;        // by pod UID
  std::optional<Clock::time_point> cri_listed_, podresources_listed_;
  std::vector<::rdma::workload::Allocation> allocations_;
};

Settings settings_of(const exporter::CollectorSettings& s, const exporter::GlobalContext& g) {
  Settings st;
  st.procfs = g.procfs_root;
  st.cri_socket = s.string("cri-socket");
  st.podresources_socket = s.string("podresources-socket");
  st.refresh = s.duration("refresh-interval");
  st.kube.endpoint.api = s.string("kubernetes-api");
  if (st.kube.endpoint.api.empty()) st.kube.endpoint.api = exporter::kube::api_from_env();
  st.kube.node = s.string("node-name");
  if (const char* n = std::getenv("NODE_NAME"); st.kube.node.empty() && n) st.kube.node = n;
  st.kube.endpoint.token_file = s.string("kubernetes-token-file");
  st.kube.endpoint.ca_file = s.string("kubernetes-ca-file");
  // At least a second between lists whatever is asked (0 would make the thread spin).
  st.kube.period = std::max<std::chrono::milliseconds>(st.refresh, std::chrono::seconds(1));
  const std::string names = s.choice("names", {"auto", "kubernetes", "cri", "none"});
  if (names == "cri" || (names == "auto" && !st.cri_socket.empty())) st.names = NamesFrom::kCri;
  else if (names == "kubernetes" || (names == "auto" && !st.kube.endpoint.api.empty() && !st.kube.node.empty()))
    st.names = NamesFrom::kKubernetes;
  if (st.names == NamesFrom::kCri && st.cri_socket.empty()) throw s.error("names", "cri needs cri-socket");
  if (st.names == NamesFrom::kKubernetes) {
    if (st.kube.endpoint.api.empty())
      throw s.error("names", "kubernetes needs kubernetes-api or KUBERNETES_SERVICE_HOST in the environment");
    if (st.kube.endpoint.api.rfind("https://", 0) != 0) throw s.error("kubernetes-api", "must be an https:// URL");
    if (!cgroup::is_dns_subdomain(st.kube.node))
      throw s.error("names", "kubernetes needs this node's name (node-name, or NODE_NAME from the downward API), "
                             "a DNS subdomain; got '" + st.kube.node + "'");
  }
  return st;
}

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "workload",
    .help = "Which pod/container, Slurm job/step or systemd unit holds queue pairs on each device and port (RDMA "
            "netlink resource tracking + /proc/<pid>/cgroup; needs the host's PID namespace), with names from the "
            "Kubernetes API (or the CRI socket) and device allocations from the kubelet.",
    .enabled_by_default = false,
    .settings = {{"names", exporter::OptionType::kString, "auto",
                  "Where pod, namespace and container names come from: kubernetes (the API server: the pods of "
                  "this node, read-only), cri (the container runtime's socket, cri-socket: its whole API, see "
                  "docs/security.md), none, or auto: cri when cri-socket is set, else kubernetes when the API "
                  "and this node's name are known, else none."},
                 {"kubernetes-api", exporter::OptionType::kString, "",
                  "The API server's https:// URL; empty: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT."},
                 {"kubernetes-token-file", exporter::OptionType::kString,
                  exporter::kube::kTokenFile,
                  "The service account token sent as the bearer token (read again before each list)."},
                 {"kubernetes-ca-file", exporter::OptionType::kString,
                  exporter::kube::kCaFile,
                  "The CA the API server's certificate must chain to."},
                 {"node-name", exporter::OptionType::kString, "",
                  "This node's name as the API knows it; empty: $NODE_NAME (the downward API's spec.nodeName)."},
                 {"cri-socket", exporter::OptionType::kString, "",
                  "CRI runtime socket (e.g. /run/containerd/containerd.sock, /var/run/crio/crio.sock) for pod, "
                  "namespace and container names (names: cri, or auto); empty: none. Grants the runtime's whole "
                  "API to this process (docs/security.md)."},
                 {"podresources-socket", exporter::OptionType::kString, "",
                  "kubelet PodResources socket (e.g. /var/lib/kubelet/pod-resources/kubelet.sock) for "
                  "rdma_device_allocation_info; empty: off."},
                 {"refresh-interval", exporter::OptionType::kDuration, "30s",
                  "Period of the Kubernetes API's pod list (one early list per period when a scrape meets an "
                  "unknown pod); least time between two CRI listings (made only when a scrape meets an unknown "
                  "pod or container) and between two PodResources listings."}},
    .create = [](const exporter::CollectorSettings& s, const exporter::GlobalContext& g)
        -> std::unique_ptr<exporter::Collector> {
      Settings st = settings_of(s, g);
      const NamesFrom names = st.names;
      try {
        return std::make_unique<WorkloadCollector>(std::move(st));
      } catch (const std::runtime_error& e) {
        // A module is missing: say so at start, not at every scrape.
        throw s.error(names == NamesFrom::kKubernetes ? "names"
                      : names == NamesFrom::kCri      ? "cri-socket"
                                                      : "podresources-socket",
                      e.what());
      }
    },
});

}  // namespace rdma::collectors::workload
