#!/bin/bash
# vm test: the exporter's hw_counters follow real RDMA traffic.
#   1. idle lab: every rxe ports/1/hw_counters file (but `lifespan`, which is
#      the cache lifetime in ms, not a counter) is exported with the kernel's
#      value, for rxe0 and rxe1; lifespan as rdma_hw_counters_lifespan_seconds;
#      the vendor-normalised families (rdma_transport_*_packets_total, ...)
#      equal the rxe counters they stand for;
#   2. N signaled 64-byte RDMA WRITEs rxe0 -> rxe1 (tests/vm/rdma_write_loop):
#      each is one request packet and one ACK, so sent_pkts and rcvd_pkts move
#      by at least N on both ports;
#   3. perftest ib_write_lat, client on rxe0, server on rxe1, L iterations:
#      the client's sent_pkts and the server's rcvd_pkts move by at least L.
# Fails when the exporter has no hw_counters collector.
# Runs inside the test guest; see tests/vm/README.md.
#
# Environment: RDMA_WRITE_LOOP_BIN (default $VM_BUILD_DIR/tests/vm/rdma_write_loop), VM_WRITES (default 1000),
# VM_LAT_ITERS (default 1000).
source "$(dirname "$0")/common.sh"

WRITE_LOOP=${RDMA_WRITE_LOOP_BIN:-${VM_BUILD_DIR:+$VM_BUILD_DIR/tests/vm/rdma_write_loop}}
[[ -x "$WRITE_LOOP" ]] || { echo "FATAL: no rdma_write_loop at '$WRITE_LOOP' (build the rdma_write_loop target, or set RDMA_WRITE_LOOP_BIN)"; exit 2; }
WRITES=${VM_WRITES:-1000}
LAT_ITERS=${VM_LAT_ITERS:-1000}

HW=$(hw_collector_name)
[[ -n "$HW" ]] || { echo "FATAL: $EXPORTER has no hw_counters collector"; exit 1; }
start_exporter "--collector.$HW"

declare -A V0 V1   # sent_pkts/rcvd_pkts per device: idle, after the writes

# delta_at_least FILE DEV COUNTER BASE MIN WHAT
delta_at_least() {
  local got
  hw_get "$1" "$2" "$3" || { bad "no $3 for $2 after $6"; return; }
  got=$REPLY
  if num_ge "$got" "$(($4 + $5))"; then
    ok "$2 $3 $4 -> $got (+$((${got%.*} - $4)), at least +$5 after $6)"
  else
    bad "$2 $3 $4 -> $got: expected at least +$5 after $6"
  fi
}

# Vendor-normalised families and the rxe counter each one is (docs/metrics.md,
# collectors/hw_counters/driver_tables.cpp); an rxe counter the kernel lacks
# (sent_bytes/rcvd_bytes: newer kernels) must leave its family absent.
NORMALISED=(
  rdma_transport_transmit_packets_total=sent_pkts
  rdma_transport_receive_packets_total=rcvd_pkts
  rdma_transport_transmit_bytes_total=sent_bytes
  rdma_transport_receive_bytes_total=rcvd_bytes
  rdma_out_of_sequence_packets_total=out_of_seq_request
  rdma_packet_sequence_error_naks_total=rcvd_seq_err
  rdma_retransmissions_total=completer_retry_err
  rdma_rnr_nak_retries_total=rcvd_rnr_err
  rdma_duplicate_requests_total=duplicate_request
)
# check_normalised FILE DEV: each family equals its raw counter in the same scrape
check_normalised() {
  local file=$1 dev=$2 pair fam raw
  for pair in "${NORMALISED[@]}"; do
    fam=${pair%%=*} raw=${pair#*=}
    if [[ -e /sys/class/infiniband/$dev/ports/1/hw_counters/$raw ]]; then
      if hw_get "$file" "$dev" "$raw"; then
        expect_value "$file" "$REPLY" "$fam" device="$dev" port=1
      else
        bad "no raw $raw for $dev"
      fi
    else
      expect_absent "$file" "$fam" device="$dev"
    fi
  done
}

section "idle lab: exported hw_counters equal the kernel's"
settle_hw_counters rxe0 rxe1
scrape "$WORK/idle"
for dev in rxe0 rxe1; do
  n=0
  for f in "/sys/class/infiniband/$dev/ports/1/hw_counters/"*; do
    c=${f##*/}
    [[ "$c" == lifespan ]] && continue
    n=$((n + 1))
    readf raw "$f"
    expect_value "$WORK/idle" "$raw" "$HW_METRIC" device=$dev port=1 "$HW_LABEL=$c"
  done
  ((n > 0)) || bad "$dev has no hw_counters files"
  # lifespan is the cache lifetime in ms, exported as a gauge in seconds
  expect_absent "$WORK/idle" "$HW_METRIC" device=$dev "$HW_LABEL=lifespan"
  expect_value "$WORK/idle" "$(awk -v ms="$(hw_sysfs $dev lifespan)" 'BEGIN { print ms / 1000 }')" \
    rdma_hw_counters_lifespan_seconds device=$dev port=1
  check_normalised "$WORK/idle" $dev
done
for dev in rxe0 rxe1; do
  for c in sent_pkts rcvd_pkts; do
    hw_get "$WORK/idle" $dev $c || fatal "no $c for $dev"
    V0[$dev.$c]=$REPLY
  done
done

section "$WRITES RDMA WRITEs rxe0 -> rxe1 (rdma_write_loop)"
"$WRITE_LOOP" rxe0 rxe1 "$WRITES" 64 || fatal "rdma_write_loop failed"
settle_hw_counters rxe0 rxe1
scrape "$WORK/writes"
delta_at_least "$WORK/writes" rxe0 sent_pkts "${V0[rxe0.sent_pkts]}" "$WRITES" "the writes (requests)"
delta_at_least "$WORK/writes" rxe1 rcvd_pkts "${V0[rxe1.rcvd_pkts]}" "$WRITES" "the writes (requests)"
delta_at_least "$WORK/writes" rxe1 sent_pkts "${V0[rxe1.sent_pkts]}" "$WRITES" "the writes (ACKs)"
delta_at_least "$WORK/writes" rxe0 rcvd_pkts "${V0[rxe0.rcvd_pkts]}" "$WRITES" "the writes (ACKs)"
for dev in rxe0 rxe1; do
  for c in sent_pkts rcvd_pkts; do
    hw_get "$WORK/writes" $dev $c || fatal "no $c for $dev"
    V1[$dev.$c]=$REPLY
    # the exporter agrees with the kernel once traffic has stopped
    readf raw "/sys/class/infiniband/$dev/ports/1/hw_counters/$c"
    expect_value "$WORK/writes" "$raw" "$HW_METRIC" device=$dev port=1 "$HW_LABEL=$c"
  done
  check_normalised "$WORK/writes" $dev
done

section "perftest ib_write_lat rxe0 -> rxe1, $LAT_ITERS iterations"
ib_write_lat -d rxe1 -x 1 -n "$LAT_ITERS" -F >"$WORK/lat-server.txt" 2>&1 &
server=$!
client_rc=1
# the server needs a moment to listen on its TCP side channel: retry the client
for _ in $(seq 20); do
  if ib_write_lat -d rxe0 -x 1 -n "$LAT_ITERS" -F 10.77.0.2 >"$WORK/lat-client.txt" 2>&1; then client_rc=0; break; fi
  kill -0 $server 2>/dev/null || break
  sleep 0.2
done
wait $server; server_rc=$?
grep -E '^ *[0-9]+ +[0-9]+ ' "$WORK/lat-client.txt" || cat "$WORK/lat-client.txt"
((client_rc == 0 && server_rc == 0)) || fatal "ib_write_lat failed (client rc=$client_rc, server rc=$server_rc)"
settle_hw_counters rxe0 rxe1
scrape "$WORK/lat"
delta_at_least "$WORK/lat" rxe0 sent_pkts "${V1[rxe0.sent_pkts]}" "$LAT_ITERS" "ib_write_lat (client writes)"
delta_at_least "$WORK/lat" rxe1 rcvd_pkts "${V1[rxe1.rcvd_pkts]}" "$LAT_ITERS" "ib_write_lat (client writes)"
delta_at_least "$WORK/lat" rxe1 sent_pkts "${V1[rxe1.sent_pkts]}" "$LAT_ITERS" "ib_write_lat (server writes)"
delta_at_least "$WORK/lat" rxe0 rcvd_pkts "${V1[rxe0.rcvd_pkts]}" "$LAT_ITERS" "ib_write_lat (server writes)"

finish
