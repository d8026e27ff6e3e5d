// workload: which pod, container, Slurm job/step or systemd unit holds queue pairs on each RDMA
// device and port. Per scrape: one RDMA netlink RES_QP_GET dump per device (the kernel's
// resource tracker: QP number, port, owner PID or kernel module), one RES_GET dump for the
// devices' resource counts, and one read of <procfs>/<pid>/cgroup per distinct owner PID,
// classified by sources/cgroup. Nothing is cached across scrapes, so a process that exits takes
// its series with it at the next scrape.
//
// The kernel lists a user QP only when its owner has a PID in the reader's PID namespace, and
// kernel QPs only to a reader in the initial one (rdma_is_visible_in_pid_ns): in a container the
// exporter needs the host's PID namespace (hostPID) and the host's /proc (--path.procfs), or it
// sees only its own namespace's QPs.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

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
using sysfs::ReadError;

constexpr const char* kPodHelp =
    "Queue pairs held by processes of a Kubernetes pod's container (pod UID and container ID from the process's "
    "cgroup; container_id is empty for pod-level processes), by device and port (port 0: not bound yet).";
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

class WorkloadCollector final : public exporter::Collector {
 public:
  explicit WorkloadCollector(std::string procfs) : procfs_(std::move(procfs)) {}

  void collect(const exporter::ScrapeContext& ctx, MetricSink& out) override {
    if (ctx.host.devices.empty()) return;
    if (!client_) {
      int err = 0;
      client_ = netlink::Client::open(err);
      if (!client_) {
        ctx.errors.report("netlink", "open",
                          std::string("RDMA netlink socket: ") + std::strerror(err) + "; no workload series");
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
    for (const auto& [k, n] : qps) {
      Labels l{{"device", k.device}, {"port", k.port}};
      switch (k.kind) {
        case WorkloadKind::kPod:
          l.emplace_back("pod_uid", k.a);
          l.emplace_back("container_id", k.b);
          out.gauge_u64("rdma_workload_pod_qps", kPodHelp, std::move(l), n);
          break;
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
    const std::string path = procfs_ + "/" + std::to_string(pid) + "/cgroup";
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

  std::string procfs_;
  std::unique_ptr<netlink::Client> client_;
};

}  // namespace

RDMA_REGISTER_COLLECTOR({
    .name = "workload",
    .help = "Which pod/container, Slurm job/step or systemd unit holds queue pairs on each device and port (RDMA "
            "netlink resource tracking + /proc/<pid>/cgroup; needs the host's PID namespace).",
    .enabled_by_default = false,
    .settings = {},
    .create = [](const exporter::CollectorSettings&, const exporter::GlobalContext& g)
        -> std::unique_ptr<exporter::Collector> { return std::make_unique<WorkloadCollector>(g.procfs_root); },
});

}  // namespace rdma::collectors::workload
