// Which workload a process belongs to, from the text of /proc/<pid>/cgroup: pure functions over
// the text, unit-tested on every runtime's and driver's path shape and fuzzed.
//
// Shapes recognised (v2: one "0::<path>" line; v1: "<id>:<controllers>:<path>" lines; the same
// paths appear under both):
//   Kubernetes, systemd driver:  /kubepods.slice/kubepods-burstable.slice/
//                                kubepods-burstable-pod<uid with _>.slice/<runtime>-<id>.scope
//                                (runtime cri-containerd, crio, docker; Guaranteed pods have no
//                                QoS slice; kind/kubelet-in-a-slice prefixes such as
//                                kubelet.slice/kubelet-kubepods.slice are accepted)
//   Kubernetes, cgroupfs driver: /kubepods/burstable/pod<uid>/<id> (CRI-O: crio-<id>)
//   Slurm (cgroup/v2 plugin):    /system.slice/slurmstepd.scope/job_<N>/step_<S>/user/task_<T>
//                                (also <nodename>_slurmstepd.scope for multiple slurmd)
//   Slurm (cgroup/v1 plugin):    /slurm/uid_<U>/job_<N>/step_<S>/task_<T>
// Paths are relative to the reader's cgroup namespace: a containerised exporter sees another
// container's as "/../../kubepods-...-pod<uid>.slice/..." or "/../../pod<uid>/<id>"; a leading
// ".." stands for the hidden kubepods or slurm ancestors.
//   otherwise: the innermost systemd unit (foo.service, session-3.scope, ...), or nothing.
// A process in a pod that no container matches (CRI-O's conmon) has the pod UID only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rdma::cgroup {

enum class WorkloadKind : std::uint8_t { kNone, kPod, kSlurm, kUnit };

struct Workload {
  WorkloadKind kind = WorkloadKind::kNone;
  std::string pod_uid;       // kPod: the pod's UID as the API server writes it (with '-')
  std::string container_id;  // kPod: the runtime's container ID (hex), empty when not in a container
  std::string job;           // kSlurm: the job ID
  std::string step;          // kSlurm: the step ("0", "batch", "extern", "interactive"); may be empty
  std::string unit;          // kUnit: the systemd unit name
  bool operator==(const Workload&) const = default;
};

// The workload of one cgroup path ("/kubepods.slice/...").
Workload classify_path(std::string_view path);

// The workload of a process from its /proc/<pid>/cgroup text. A Kubernetes or Slurm match in any
// line wins over a systemd unit (on v1, only some controllers' paths carry the pod); the v2 line
// is preferred among equals. Malformed lines are skipped.
Workload parse_proc_cgroup(std::string_view text);

}  // namespace rdma::cgroup
