#!/bin/bash
# vm test: the workload collector on real QPs. Four rdma_write_loop processes hold RC QPs on rxe0
# and rxe1, each in its own cgroup v2 directory shaped like what its owner would create:
#   pod    kubelet + containerd (systemd driver): kubepods.slice/kubepods-burstable.slice/
#          kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope   rxe0: 1, rxe1: 1
#   job    slurmstepd (cgroup/v2): system.slice/slurmstepd.scope/job_4242/step_0/user/task_0
#                                                                        rxe1: 2, rxe0: 1
#   unit   a systemd service: system.slice/ib_bench.service              rxe0: 1, rxe1: 1
#   none   the root cgroup: unattributed                                 rxe0: 1, rxe1: 1
# A CRI double and a PodResources double (tests/workload/grpc_doubles.py, from the pinned .proto
# files) answer with the pod's names and an allocation of rxe1.
# A Kubernetes API double (tests/workload/kube_api_double.py, HTTPS) answers with the same names:
# the default source, without the CRI socket; names the API server could not have written (escaped
# non-DNS, raw invalid UTF-8) leave the scrape valid for promtool.
# Checks: each is reported on the right device and port with its pod UID/container ID (and the
# CRI's names, listed once for many scrapes, or the API's), job/step or unit; every QP `rdma resource show qp` lists is counted once (kernel ones apart); the device
# resource counts equal `rdma resource show`; no collector errors; when the pod's process exits,
# its series go and the others stay. Figures (no check): the collector's time per scrape with
# 1,000 QPs, and the daemon's RSS with and without the collector.
source "$(dirname "$0")/common.sh"

WRITE_LOOP=${RDMA_WRITE_LOOP_BIN:?set RDMA_WRITE_LOOP_BIN to the rdma_write_loop binary}
BENCH_SCRAPES=${VM_BENCH_SCRAPES:-10}
CG=/sys/fs/cgroup
POD_UID=0d5e4c2b-3f1a-4b6c-9d8e-7f6a5b4c3d2e
CID=4f1c2d3e4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
declare -A DIR=(
  [pod]=$CG/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD_UID//-/_}.slice/cri-containerd-$CID.scope
  [job]=$CG/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0
  [unit]=$CG/system.slice/ib_bench.service
  [none]=$CG
)
declare -A PID=()

stop_exporter() {
  [[ -n "$EXPORTER_PID" ]] && { kill "$EXPORTER_PID" 2>/dev/null; wait "$EXPORTER_PID" 2>/dev/null; }
  EXPORTER_PID=
}
stop_holders() {
  local p
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  PID=()
}
DOUBLES_PID=
trap 'stop_holders; [[ -n "$DOUBLES_PID" ]] && kill "$DOUBLES_PID"; cleanup' EXIT

# hold NAME DEV_A DEV_B [EXTRA_QPS]: rdma_write_loop in cgroup DIR[NAME], holding its QPs
hold() {
  local name=$1 i
  bash -c 'echo $$ >"$1/cgroup.procs" && exec "${@:2}"' _ "${DIR[$name]}" \
    "$WRITE_LOOP" "$2" "$3" 10 64 hold "${4:-0}" >"$WORK/$name.out" 2>&1 &
  PID[$name]=$!
  for i in $(seq 600); do
    grep -q '^holding' "$WORK/$name.out" && return 0
    kill -0 "${PID[$name]}" 2>/dev/null || fatal "rdma_write_loop ($name) exited: $(cat "$WORK/$name.out")"
    sleep 0.1
  done
  fatal "rdma_write_loop ($name) does not hold its QPs: $(cat "$WORK/$name.out")"
}

# kernel_qps DEV/PORT: the QPs `rdma resource show qp` lists on a port
kernel_qps() { rdma resource show qp link "$1" | grep -c "^link $1 "; }
# exported_qps FILE DEV PORT: the sum of every workload family's series for the port
exported_qps() {
  local f v s=0
  for f in pod slurm unit unattributed kernel; do
    for v in $(series "$1" "rdma_workload_${f}_qps" device="$2" port="$3"); do s=$((s + v)); done
  done
  echo "$s"
}
errors() { series "$1" rdma_exporter_collector_errors_total collector=workload | awk '{ s += $1 } END { print s + 0 }'; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

section "cgroup v2 with a kubelet-shaped and a slurmstepd-shaped tree"
mountpoint -q $CG || mount -t cgroup2 cgroup2 $CG || fatal "cannot mount cgroup2 on $CG"
for d in "${DIR[@]}"; do mkdir -p "$d" || fatal "cannot create $d"; done
ok "cgroup2 on $CG, $((${#DIR[@]} - 1)) workload directories"

hold pod rxe0 rxe1
hold job rxe1 rxe0 1
hold unit rxe0 rxe1
hold none rxe0 rxe1
grep -q "^0::/kubepods.slice/kubepods-burstable.slice/" "/proc/${PID[pod]}/cgroup" && ok "the pod's process is in its scope" \
  || bad "pod process cgroup: $(cat "/proc/${PID[pod]}/cgroup")"

section "each owner on its device and port"
DOUBLES=$(dirname "$0")/../../workload/grpc_doubles.py
cat >"$WORK/doubles.json" <<JSON
{"pods": [{"id": "sandbox1", "uid": "$POD_UID", "namespace": "training", "name": "llm-0"}],
 "containers": [{"id": "$CID", "pod_sandbox_id": "sandbox1", "name": "worker"}],
 "pod_resources": [{"namespace": "training", "name": "llm-0", "containers": [{"name": "worker",
   "devices": [{"resource_name": "rdma/hca_shared_devices_a", "device_ids": ["rxe1"]}]}]}]}
JSON
/usr/bin/python3 "$DOUBLES" --data "$WORK/doubles.json" --cri "$WORK/cri.sock" --podresources "$WORK/kubelet.sock" \
  --calls "$WORK/calls" >"$WORK/doubles.out" 2>&1 &
DOUBLES_PID=$!
for i in $(seq 600); do grep -q '^ready' "$WORK/doubles.out" && break; sleep 0.1; done
grep -q '^ready' "$WORK/doubles.out" || fatal "protocol doubles did not start: $(cat "$WORK/doubles.out")"
start_exporter --collector.disable-defaults --collector.workload --path.procfs=/proc \
  "--collector.workload.cri-socket=$WORK/cri.sock" "--collector.workload.podresources-socket=$WORK/kubelet.sock"
scrape "$WORK/s1"
P=(pod_uid=$POD_UID container_id=$CID namespace=training pod=llm-0 container=worker)
expect_value "$WORK/s1" 1 rdma_workload_pod_qps device=rxe0 port=1 "${P[@]}"
expect_value "$WORK/s1" 1 rdma_workload_pod_qps device=rxe1 port=1 "${P[@]}"
expect_value "$WORK/s1" 1 rdma_workload_slurm_qps device=rxe0 port=1 job=4242 step=0
expect_value "$WORK/s1" 2 rdma_workload_slurm_qps device=rxe1 port=1 job=4242 step=0
expect_value "$WORK/s1" 1 rdma_workload_unit_qps device=rxe0 port=1 unit=ib_bench.service
expect_value "$WORK/s1" 1 rdma_workload_unit_qps device=rxe1 port=1 unit=ib_bench.service
expect_value "$WORK/s1" 1 rdma_workload_unattributed_qps device=rxe0 port=1
expect_value "$WORK/s1" 1 rdma_workload_unattributed_qps device=rxe1 port=1
for dev in rxe0 rxe1; do
  for port in 1 0; do
    want=$(kernel_qps "$dev/$( ((port)) && echo "$port" || echo -)")
    got=$(exported_qps "$WORK/s1" "$dev" "$port")
    [[ "$got" == "$want" ]] && ok "$dev port $port: $got QPs exported = rdma resource show qp" \
      || bad "$dev port $port: $got QPs exported, rdma resource show qp lists $want"
  done
  want=$(rdma resource show qp link "$dev/1" | grep -c ' comm \[')
  got=0
  for v in $(series "$WORK/s1" rdma_workload_kernel_qps device="$dev" port=1); do got=$((got + v)); done
  [[ "$got" == "$want" ]] && ok "$dev: $got kernel QPs counted apart" || bad "$dev: $got kernel QPs, rdma lists $want"
  for r in qp cq mr pd; do
    want=$(rdma resource show "$dev" | tr ' ' '\n' | awk -v r="$r" 'prev == r { print; exit } { prev = $0 }')
    expect_value "$WORK/s1" "$want" rdma_device_resources device="$dev" resource="$r"
  done
done
[[ "$(errors "$WORK/s1")" == 0 ]] && ok "no workload errors" || bad "workload errors: $(errors "$WORK/s1")"
expect_value "$WORK/s1" 1 rdma_device_allocation_info device=rxe1 namespace=training pod=llm-0 container=worker \
  resource=rdma/hca_shared_devices_a
scrape "$WORK/s1b"
scrape "$WORK/s1c"
n=$(grep -c '^ListContainers$' "$WORK/calls")
((n == 1)) && ok "three scrapes, one CRI listing (names cached)" || bad "$n CRI ListContainers calls in three scrapes"

section "names from the Kubernetes API (the default; no CRI socket)"
# The API server's pod list over HTTPS (tests/workload/kube_api_double.py: its own CA, the bearer
# token, the node field selector): the same pod on this node, another on another node. One exporter
# listing every second; the body is switched under it (each python3 start costs seconds under TCG).
KUBE=$(dirname "$0")/../../workload/kube_api_double.py
NODE=vm-node-0
/usr/bin/python3 "$KUBE" --pod-list "$NODE" "$POD_UID" training llm-0 "$CID" worker "$WORK/pods"
cp "$WORK/pods.json" "$WORK/body.json"
echo kube-token-1 >"$WORK/kube-token"
mkdir -p "$WORK/kube"
/usr/bin/python3 "$KUBE" --dir "$WORK/kube" --body "$WORK/body.json" --token-file "$WORK/kube-token" --node "$NODE" \
  --log "$WORK/kube.log" >"$WORK/kube.out" 2>&1 &
KUBE_PID=$!
for i in $(seq 600); do grep -q '^ready' "$WORK/kube.out" && break; sleep 0.1; done
KUBE_PORT=$(awk '/^ready/ { print $2 }' "$WORK/kube.out")
[[ -n "$KUBE_PORT" ]] || fatal "Kubernetes API double did not start: $(cat "$WORK/kube.out")"
stop_exporter
start_exporter --collector.disable-defaults --collector.workload --path.procfs=/proc \
  "--collector.workload.kubernetes-api=https://127.0.0.1:$KUBE_PORT" "--collector.workload.kubernetes-ca-file=$WORK/kube/ca.crt" \
  "--collector.workload.kubernetes-token-file=$WORK/kube-token" "--collector.workload.node-name=$NODE" \
  --collector.workload.refresh-interval=1s
# wait_for FILE WHAT NAME [label=value]...: scrapes into FILE until the sample exists (at most 30 s)
wait_for() {
  local file=$1 what=$2 i
  shift 2
  for i in $(seq 100); do
    scrape "$file"
    _lookup "$file" "$@"
    ((${#_FOUND[@]})) && return 0
    sleep 0.3
  done
  bad "$what: no $* in 30 s"
}
promtool_ok() {
  promtool check metrics <"$1" >"$WORK/promtool" 2>&1 && ok "promtool check metrics ($2)" || { bad "promtool ($2)"; cat "$WORK/promtool"; }
}
# api_up appears with the first list's outcome; the pod count reads 0 until then.
wait_for "$WORK/k1" "first list" rdma_workload_kubernetes_api_up
expect_value "$WORK/k1" 1 rdma_workload_kubernetes_api_up
expect_value "$WORK/k1" 1 rdma_workload_kubernetes_pods
expect_value "$WORK/k1" 1 rdma_workload_pod_qps device=rxe0 port=1 "${P[@]}"
expect_value "$WORK/k1" 1 rdma_workload_pod_qps device=rxe1 port=1 "${P[@]}"
[[ "$(errors "$WORK/k1")" == 0 ]] && ok "no workload errors" || bad "workload errors: $(errors "$WORK/k1")"
grep -q '"fieldSelector": \["spec.nodeName='"$NODE"'"\]' "$WORK/kube.log" && ! grep -q '"token_ok": false' "$WORK/kube.log" \
  && ok "listed this node's pods with the token" || bad "API requests: $(cat "$WORK/kube.log")"
grep -q -e libgrpc -e rdma_exporter_workload "/proc/$EXPORTER_PID/maps" && bad "gRPC mapped for API names" \
  || ok "no gRPC (CRI) module mapped for API names"
promtool_ok "$WORK/k1" "names from the API"
# A container name the API server could not have written, escaped (valid UTF-8, not a DNS label):
# dropped, the pod's names kept.
cp "$WORK/pods-escaped.json" "$WORK/body.new" && mv "$WORK/body.new" "$WORK/body.json"
wait_for "$WORK/k2" "escaped name dropped" rdma_workload_pod_qps device=rxe0 port=1 namespace=training pod=llm-0 container=
promtool_ok "$WORK/k2" "an escaped non-DNS container name"
# Raw bytes ff fe (not UTF-8): the list is rejected whole and counted, the last good names stay.
cp "$WORK/pods-raw.json" "$WORK/body.new" && mv "$WORK/body.new" "$WORK/body.json"
wait_for "$WORK/k3" "a list that is not UTF-8 counted" rdma_exporter_collector_errors_total collector=workload \
  reason=kubernetes_decode
expect_value "$WORK/k3" 1 rdma_workload_pod_qps device=rxe0 port=1 namespace=training pod=llm-0 container=
promtool_ok "$WORK/k3" "raw invalid UTF-8 in a container name"
kill "$KUBE_PID"; wait "$KUBE_PID" 2>/dev/null

section "an exiting process takes its series with it"
kill "${PID[pod]}"; wait "${PID[pod]}" 2>/dev/null; unset 'PID[pod]'
scrape "$WORK/s2"
expect_absent "$WORK/s2" rdma_workload_pod_qps
expect_value "$WORK/s2" 2 rdma_workload_slurm_qps device=rxe1 port=1 job=4242 step=0
expect_value "$WORK/s2" 1 rdma_workload_unit_qps device=rxe0 port=1 unit=ib_bench.service

section "figures: 1,000 QPs, and the RSS with and without the collector"
stop_holders
stop_exporter
hold job rxe0 rxe1 998
start_exporter --collector.workload --path.procfs=/proc
scrape "$WORK/b0"
expect_value "$WORK/b0" 500 rdma_workload_slurm_qps device=rxe0 port=1 job=4242 step=0
expect_value "$WORK/b0" 500 rdma_workload_slurm_qps device=rxe1 port=1 job=4242 step=0
dur=0
for i in $(seq "$BENCH_SCRAPES"); do
  scrape "$WORK/b1"
  dur=$(awk -v a="$dur" -v b="$(value "$WORK/b1" rdma_exporter_collector_scrape_duration_seconds collector=workload)" 'BEGIN { print a + b }')
done
rss_on=$(rss_kib "$EXPORTER_PID")
grep -q rdma_exporter_workload "/proc/$EXPORTER_PID/maps" && bad "gRPC module mapped without a socket set" \
  || ok "no gRPC module mapped without a socket set"
stop_exporter
start_exporter --collector.workload --path.procfs=/proc "--collector.workload.cri-socket=$WORK/cri.sock" \
  "--collector.workload.podresources-socket=$WORK/kubelet.sock"
scrape "$WORK/g0"
scrape "$WORK/g1"
rss_grpc=$(rss_kib "$EXPORTER_PID")
stop_exporter
start_exporter
scrape "$WORK/d0"
scrape "$WORK/d1"
rss_off=$(rss_kib "$EXPORTER_PID")
grep -q -e libgrpc -e libprotobuf "/proc/$EXPORTER_PID/maps" && bad "gRPC mapped by default" || ok "no gRPC mapped by default"
echo "  figures: workload collector with 1000 QPs (2 devices, 1 owner): $(awk -v d="$dur" -v n="$BENCH_SCRAPES" 'BEGIN { printf "%.0f", d / n * 1e6 }') us per scrape (mean of $BENCH_SCRAPES, TCG guest); VmRSS after 2+ scrapes: default collectors ${rss_off} KiB, + workload ${rss_on} KiB, + workload with CRI and PodResources sockets (gRPC module) ${rss_grpc} KiB"
stop_exporter
finish
