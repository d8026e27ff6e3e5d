#!/bin/bash
# vm test: a queue pair whose packets are all lost runs out of transport retries, and
# rdma_qp_retries_exceeded_total{kind="transport"} of its port rises by one.
#   1. idle lab: the family equals rxe's retry_exceeded_err / retry_rnr_exceeded_err on both ports;
#   2. veth0's neighbour entry for 10.77.0.2 points at a MAC nobody has: every packet rxe0 sends
#      is dropped by veth1 (another host's frame); one RDMA WRITE rxe0 -> rxe1 (timeout 14,
#      retry_cnt 3; rxe retries forever with 7) completes with "transport retry counter exceeded";
#   3. rxe0's kind="transport" series is one more than before and equals the kernel's counter;
#      rxe1's did not move; the neighbour entry is restored and a write succeeds again.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

WRITE_LOOP=${RDMA_WRITE_LOOP_BIN:-${VM_BUILD_DIR:+$VM_BUILD_DIR/tests/vm/rdma_write_loop}}
[[ -x "$WRITE_LOOP" ]] || { echo "FATAL: no rdma_write_loop at '$WRITE_LOOP' (build the rdma_write_loop target, or set RDMA_WRITE_LOOP_BIN)"; exit 2; }
HW=$(hw_collector_name)
[[ -n "$HW" ]] || { echo "FATAL: $EXPORTER has no hw_counters collector"; exit 1; }
start_exporter "--collector.$HW"
FAM=rdma_qp_retries_exceeded_total
declare -A V0

section "idle lab: the family equals the rxe counters"
settle_hw_counters rxe0 rxe1
scrape "$WORK/idle"
for dev in rxe0 rxe1; do
  for pair in transport=retry_exceeded_err rnr=retry_rnr_exceeded_err; do
    kind=${pair%%=*} raw=${pair#*=}
    expect_value "$WORK/idle" "$(hw_sysfs $dev $raw)" "$FAM" device=$dev port=1 kind=$kind
    get "$WORK/idle" "$FAM" device=$dev port=1 kind=$kind || fatal "no $FAM for $dev kind=$kind"
    V0[$dev.$kind]=$REPLY
  done
done

section "every packet rxe0 sends is lost: one RDMA WRITE runs out of retries"
ip neigh replace 10.77.0.2 lladdr 02:00:00:00:00:01 dev veth0 nud permanent || fatal "ip neigh replace failed"
before=$(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/{sent_pkts,completer_retry_err,retry_exceeded_err} | tr '\n' ' ')
t0=$(date +%s.%N)
RDMA_WRITE_LOOP_RETRY_CNT=3 timeout 60 "$WRITE_LOOP" rxe0 rxe1 1 64 >"$WORK/lost.txt" 2>&1
rc=$?
echo "  rdma_write_loop rc=$rc; rxe0 sent_pkts completer_retry_err retry_exceeded_err: $before -> $(cat /sys/class/infiniband/rxe0/ports/1/hw_counters/{sent_pkts,completer_retry_err,retry_exceeded_err} | tr '\n' ' ')"
if ((rc == 0)); then
  bad "the write completed although every packet was lost: $(cat "$WORK/lost.txt")"
elif grep -q "retry counter exceeded" "$WORK/lost.txt"; then
  ok "the write failed: $(grep -o 'completion error: .*' "$WORK/lost.txt") after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
else
  bad "the write failed otherwise: $(cat "$WORK/lost.txt")"
fi
ip neigh del 10.77.0.2 dev veth0 || fatal "ip neigh del failed"
settle_hw_counters rxe0 rxe1
scrape "$WORK/lost"
expect_value "$WORK/lost" "$((V0[rxe0.transport] + 1))" "$FAM" device=rxe0 port=1 kind=transport
expect_value "$WORK/lost" "$(hw_sysfs rxe0 retry_exceeded_err)" "$FAM" device=rxe0 port=1 kind=transport
expect_value "$WORK/lost" "${V0[rxe0.rnr]}" "$FAM" device=rxe0 port=1 kind=rnr
expect_value "$WORK/lost" "${V0[rxe1.transport]}" "$FAM" device=rxe1 port=1 kind=transport

section "the path restored: a write completes"
"$WRITE_LOOP" rxe0 rxe1 10 64 >"$WORK/ok.txt" 2>&1 && ok "$(cat "$WORK/ok.txt")" || bad "write after the restore: $(cat "$WORK/ok.txt")"

finish
