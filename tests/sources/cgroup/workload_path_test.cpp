// /proc/<pid>/cgroup texts as kubelet (systemd and cgroupfs drivers; containerd, CRI-O, Docker;
// every QoS class), slurmstepd (cgroup/v2 and cgroup/v1 plugins) and systemd leave them, v1 and v2.
#include <catch2/catch.hpp>

#include "sources/cgroup/workload_path.h"

using namespace rdma::cgroup;

namespace {

constexpr const char* kUid = "0d5e4c2b-3f1a-4b6c-9d8e-7f6a5b4c3d2e";
constexpr const char* kUidSystemd = "0d5e4c2b_3f1a_4b6c_9d8e_7f6a5b4c3d2e";
constexpr const char* kId = "4f1c2d3e4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

Workload pod(std::string container = kId) {
  Workload w;
  w.kind = WorkloadKind::kPod;
  w.pod_uid = kUid;
  w.container_id = std::move(container);
  return w;
}

Workload job(std::string id, std::string step) {
  Workload w;
  w.kind = WorkloadKind::kSlurm;
  w.job = std::move(id);
  w.step = std::move(step);
  return w;
}

Workload unit(std::string name) {
  Workload w;
  w.kind = WorkloadKind::kUnit;
  w.unit = std::move(name);
  return w;
}

std::string s(const char* a, const std::string& b = {}, const char* c = "", const std::string& d = {}, const char* e = "") {
  return std::string(a) + b + c + d + e;
}

}  // namespace

TEST_CASE("Kubernetes, systemd driver, cgroup v2: every runtime and QoS class") {
  const std::string uid = kUidSystemd, id = kId;
  for (const char* runtime : {"cri-containerd-", "crio-", "docker-"}) {
    INFO(runtime);
    CHECK(parse_proc_cgroup(s("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod", uid, ".slice/") +
                            runtime + id + ".scope\n") == pod());
    CHECK(parse_proc_cgroup(s("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod", uid, ".slice/") +
                            runtime + id + ".scope\n") == pod());
    // Guaranteed pods sit directly under kubepods.slice.
    CHECK(parse_proc_cgroup(s("0::/kubepods.slice/kubepods-pod", uid, ".slice/") + runtime + id + ".scope\n") == pod());
  }
  // A container that made sub-cgroups of its own (systemd inside, nested runtimes).
  CHECK(classify_path(s("/kubepods.slice/kubepods-pod", uid, ".slice/cri-containerd-", id, ".scope/init.scope")) ==
        pod());
  // kind and kubelet-in-a-slice layouts put kubepods one slice deeper.
  CHECK(classify_path(s("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
                        "kubelet-kubepods-besteffort-pod",
                        uid, ".slice/cri-containerd-", id, ".scope")) == pod());
  // The pause container's and conmon's scopes: the pod, no container of its own for conmon.
  CHECK(classify_path(s("/kubepods.slice/kubepods-pod", uid, ".slice/crio-conmon-", id, ".scope")) == pod(""));
  CHECK(classify_path(s("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod", uid, ".slice")) == pod(""));
}

TEST_CASE("Kubernetes, cgroupfs driver: v2 and v1, every runtime and QoS class") {
  const std::string uid = kUid, id = kId;
  CHECK(parse_proc_cgroup(s("0::/kubepods/burstable/pod", uid, "/", id, "\n")) == pod());
  CHECK(parse_proc_cgroup(s("0::/kubepods/besteffort/pod", uid, "/", id, "\n")) == pod());
  CHECK(parse_proc_cgroup(s("0::/kubepods/pod", uid, "/", id, "\n")) == pod());
  CHECK(parse_proc_cgroup(s("0::/kubepods/burstable/pod", uid, "/crio-", id, "\n")) == pod());
  // cgroup v1 with Docker: every controller carries the path; name=systemd may not.
  const std::string v1 = s("12:memory:/kubepods/burstable/pod", uid, "/", id, "\n") +
                         s("11:cpu,cpuacct:/kubepods/burstable/pod", uid, "/", id, "\n") +
                         "1:name=systemd:/system.slice/containerd.service\n";
  CHECK(parse_proc_cgroup(v1) == pod());
  // v1 with the systemd driver.
  CHECK(parse_proc_cgroup(s("4:devices:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod", kUidSystemd,
                            ".slice/docker-", id, ".scope\n")) == pod());
}

TEST_CASE("paths seen from a containerised exporter's cgroup namespace") {
  const std::string id = kId;
  CHECK(parse_proc_cgroup(s("0::/../../kubepods-besteffort-pod", kUidSystemd, ".slice/cri-containerd-", id, ".scope\n")) ==
        pod());
  CHECK(parse_proc_cgroup(s("0::/../../pod", kUid, "/", id, "\n")) == pod());
  CHECK(parse_proc_cgroup("0::/../../../system.slice/slurmstepd.scope/job_5/step_1/user/task_0\n") == job("5", "1"));
  CHECK(parse_proc_cgroup("0::/../job_5/step_1/user/task_0\n") == job("5", "1"));
}

TEST_CASE("Slurm: slurmstepd's cgroup/v2 and cgroup/v1 paths") {
  CHECK(parse_proc_cgroup("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n") == job("4242", "0"));
  CHECK(parse_proc_cgroup("0::/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0\n") == job("7", "batch"));
  CHECK(parse_proc_cgroup("0::/system.slice/slurmstepd.scope/job_7/step_extern/user/task_special\n") ==
        job("7", "extern"));
  CHECK(parse_proc_cgroup("0::/system.slice/node3_slurmstepd.scope/job_12/step_3/user/task_1\n") == job("12", "3"));
  // slurmstepd's own process sits in job_N/step_M/slurm.
  CHECK(classify_path("/system.slice/slurmstepd.scope/job_12/step_3/slurm") == job("12", "3"));
  CHECK(classify_path("/system.slice/slurmstepd.scope/job_12") == job("12", ""));
  CHECK(parse_proc_cgroup("10:freezer:/slurm/uid_1000/job_99/step_2/task_0\n"
                          "5:memory:/slurm/uid_1000/job_99/step_2/task_0\n"
                          "1:name=systemd:/system.slice/slurmd.service\n") == job("99", "2"));
}

TEST_CASE("anything else: the innermost systemd unit, or nothing") {
  CHECK(parse_proc_cgroup("0::/system.slice/ib_write_bw.service\n") == unit("ib_write_bw.service"));
  CHECK(parse_proc_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n") == unit("session-3.scope"));
  CHECK(parse_proc_cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/mpi.scope\n") == unit("mpi.scope"));
  CHECK(parse_proc_cgroup("0::/system.slice/docker-" + std::string(kId) + ".scope\n") ==
        unit("docker-" + std::string(kId) + ".scope"));
  CHECK(parse_proc_cgroup("0::/\n") == Workload{});
  CHECK(parse_proc_cgroup("0::/init.slice\n") == Workload{});
  CHECK(parse_proc_cgroup("0::/mygroup/sub\n") == Workload{});
  // Hybrid hierarchy: the v2 line is preferred among units.
  CHECK(parse_proc_cgroup("1:name=systemd:/system.slice/a.service\n0::/system.slice/b.service\n") == unit("b.service"));
}

TEST_CASE("look-alikes are not workloads") {
  // A pod UID must be a UUID; a job must be a number under a slurm segment.
  CHECK(classify_path("/kubepods/burstable/podnot-a-uid/abc") == Workload{});
  CHECK(classify_path(s("/other/pod", kUid, "/", kId)) == Workload{});
  CHECK(classify_path("/system.slice/slurmstepd.scope/job_x/step_0") == unit("slurmstepd.scope"));
  CHECK(classify_path("/jobs/job_12/step_0") == Workload{});
  // A container segment that is not a hex ID is left out, the pod stays.
  CHECK(classify_path(s("/kubepods/pod", kUid, "/notacontainer")) == pod(""));
}

TEST_CASE("malformed text gives no workload, and a path with a colon keeps its tail") {
  CHECK(parse_proc_cgroup("") == Workload{});
  CHECK(parse_proc_cgroup("garbage") == Workload{});
  CHECK(parse_proc_cgroup("1:") == Workload{});
  CHECK(parse_proc_cgroup(std::string("0::/kubepods/pod\0\0", 19)) == Workload{});
  // A path with ':' in it keeps its tail.
  CHECK(parse_proc_cgroup("0::/system.slice/a:b.service\n") == unit("a:b.service"));
}
