#!/bin/bash
# vm test: the hw_counters collector's two read paths on real rxe devices.
#   1. the guest kernel has RDMA netlink: with --collector.hw_counters.netlink=true every port
#      counter equals `rdma statistic show link` and sysfs (idle lab), with no errors;
#   2. netlink and sysfs exporters export the same rdma_hw_counters_total series and values;
#   3. reads are counted: per scrape the netlink path makes one request per port (2) plus one
#      lifespan read per port; the sysfs path reads every file (16 per rxe port);
#   4. after N RDMA WRITEs rxe0 -> rxe1, the raw counters and the normalised
#      rdma_transport_{transmit,receive}_packets_total moved by at least N (netlink path);
#   5. (figures, no check) reads and collector time per scrape, netlink against sysfs.
# Fails when the exporter has no hw_counters collector.
source "$(dirname "$0")/common.sh"

WRITE_LOOP=${RDMA_WRITE_LOOP_BIN:?set RDMA_WRITE_LOOP_BIN to the rdma_write_loop binary}
WRITES=${VM_WRITES:-1000}
BENCH_SCRAPES=${VM_BENCH_SCRAPES:-10}
DEVS=(rxe0 rxe1)

HW=$(hw_collector_name)
[[ -n "$HW" ]] || { echo "FATAL: $EXPORTER has no hw_counters collector"; exit 1; }

stop_exporter() {
  [[ -n "$EXPORTER_PID" ]] && { kill "$EXPORTER_PID" 2>/dev/null; wait "$EXPORTER_PID" 2>/dev/null; }
  EXPORTER_PID=
}
reads() { value "$1" rdma_hw_counters_reads_total method="$2"; }
hw_errors() { series "$1" rdma_exporter_collector_errors_total collector=hw_counters | awk '{ s += $1 } END { print s + 0 }'; }

# stat_value DEV COUNTER: the kernel's value through netlink (iproute2)
stat_value() {
  rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v c="$2" 'prev == c { print; exit } { prev = $0 }'
}

# bench PATH: reads and hw_counters collector time per scrape over $BENCH_SCRAPES scrapes (figures)
bench() {
  section "benchmark: $1 path, $BENCH_SCRAPES scrapes"
  local i t0 t1 dur=0
  scrape "$WORK/b0"
  t0=$(date +%s%N)
  for i in $(seq "$BENCH_SCRAPES"); do
    scrape "$WORK/b.$1"
    dur=$(awk -v a="$dur" -v b="$(value "$WORK/b.$1" rdma_exporter_collector_scrape_duration_seconds collector=hw_counters)" 'BEGIN { print a + b }')
  done
  t1=$(date +%s%N)
  echo "  figures: $1 path: $(( ($(reads "$WORK/b.$1" netlink) - $(reads "$WORK/b0" netlink)) / BENCH_SCRAPES )) requests + $(( ($(reads "$WORK/b.$1" sysfs) - $(reads "$WORK/b0" sysfs)) / BENCH_SCRAPES )) file reads per scrape, $(( (t1 - t0) / BENCH_SCRAPES / 1000 )) us per curl /metrics (TCG), hw_counters collector $(awk -v d="$dur" -v n="$BENCH_SCRAPES" 'BEGIN { printf "%.0f", d / n * 1e6 }') us per scrape (mean)"
}

section "the guest kernel answers RDMA netlink STAT_GET"
rdma statistic show link rxe0/1 >"$WORK/stat.txt" 2>&1 && grep -q sent_pkts "$WORK/stat.txt" \
  && ok "rdma statistic show link rxe0/1" || fatal "no RDMA netlink statistics: $(cat "$WORK/stat.txt")"

section "netlink path: values equal rdma statistic and sysfs"
start_exporter --collector.disable-defaults "--collector.$HW" "--collector.$HW.netlink=true"
settle_hw_counters "${DEVS[@]}"
scrape "$WORK/nl1"
for dev in "${DEVS[@]}"; do
  for f in /sys/class/infiniband/$dev/ports/1/hw_counters/*; do
    c=${f##*/}
    [[ "$c" == lifespan ]] && continue
    want=$(cat "$f")
    expect_value "$WORK/nl1" "$want" "$HW_METRIC" device=$dev port=1 "$HW_LABEL=$c"
    nl=$(stat_value "$dev" "$c")
    [[ "$nl" == "$want" ]] && ok "$dev $c: netlink $nl = sysfs $want" || bad "$dev $c: netlink '$nl', sysfs '$want'"
  done
  expect_value "$WORK/nl1" "$(awk '{ print $1 / 1000 }' /sys/class/infiniband/$dev/ports/1/hw_counters/lifespan)" \
    rdma_hw_counters_lifespan_seconds device=$dev port=1
done
scrape "$WORK/nl2"
nl_req=$(( $(reads "$WORK/nl2" netlink) - $(reads "$WORK/nl1" netlink) ))
nl_sys=$(( $(reads "$WORK/nl2" sysfs) - $(reads "$WORK/nl1" sysfs) ))
((nl_req == ${#DEVS[@]})) && ok "netlink path: $nl_req requests per scrape (one per port)" || bad "netlink path: $nl_req requests per scrape, expected ${#DEVS[@]}"
((nl_sys == ${#DEVS[@]})) && ok "netlink path: $nl_sys sysfs reads per scrape (lifespan)" || bad "netlink path: $nl_sys sysfs reads per scrape, expected ${#DEVS[@]}"
[[ "$(hw_errors "$WORK/nl2")" == 0 ]] && ok "no hw_counters errors" || bad "hw_counters errors: $(hw_errors "$WORK/nl2")"

section "$WRITES RDMA WRITEs rxe0 -> rxe1 move raw and normalised packet counters"
declare -A B
for dev in "${DEVS[@]}"; do
  B[$dev.sent]=$(value "$WORK/nl2" "$HW_METRIC" device=$dev port=1 "$HW_LABEL=sent_pkts")
  B[$dev.rcvd]=$(value "$WORK/nl2" "$HW_METRIC" device=$dev port=1 "$HW_LABEL=rcvd_pkts")
  B[$dev.ntx]=$(value "$WORK/nl2" rdma_transport_transmit_packets_total device=$dev port=1)
  B[$dev.nrx]=$(value "$WORK/nl2" rdma_transport_receive_packets_total device=$dev port=1)
done
"$WRITE_LOOP" rxe0 rxe1 "$WRITES" 64 || fatal "rdma_write_loop failed"
settle_hw_counters "${DEVS[@]}"
scrape "$WORK/nl3"
moved() {  # FILE NAME BASE DEV [label=value]...
  local file=$1 name=$2 base=$3 dev=$4; shift 4
  local got; got=$(value "$file" "$name" device=$dev port=1 "$@") || { bad "no $name $dev $*"; return; }
  num_ge "$got" "$((base + WRITES))" && ok "$dev $name $* $base -> $got (>= +$WRITES)" || bad "$dev $name $* $base -> $got, expected >= +$WRITES"
}
moved "$WORK/nl3" "$HW_METRIC" "${B[rxe0.sent]}" rxe0 "$HW_LABEL=sent_pkts"
moved "$WORK/nl3" "$HW_METRIC" "${B[rxe1.rcvd]}" rxe1 "$HW_LABEL=rcvd_pkts"
moved "$WORK/nl3" rdma_transport_transmit_packets_total "${B[rxe0.ntx]}" rxe0
moved "$WORK/nl3" rdma_transport_receive_packets_total "${B[rxe1.nrx]}" rxe1
moved "$WORK/nl3" rdma_transport_transmit_packets_total "${B[rxe1.ntx]}" rxe1   # the ACKs
moved "$WORK/nl3" rdma_transport_receive_packets_total "${B[rxe0.nrx]}" rxe0

bench netlink
stop_exporter

section "sysfs path: same series and values as the netlink path"
start_exporter --collector.disable-defaults "--collector.$HW" "--collector.$HW.netlink=false"
settle_hw_counters "${DEVS[@]}"
scrape "$WORK/sy1"
# the lab is idle now: the two paths must agree exactly (netlink shows no optional counters on rxe)
settle_hw_counters "${DEVS[@]}"
pattern="^(${HW_METRIC}|rdma_hw_counters_lifespan_seconds|rdma_transport_|rdma_out_of|rdma_packet_|rdma_retrans|rdma_rnr_|rdma_duplicate_)"
grep -E "$pattern" "$WORK/b.netlink" | sort >"$WORK/paths.nl"
grep -E "$pattern" "$WORK/sy1" | sort >"$WORK/paths.sy"
if cmp -s "$WORK/paths.nl" "$WORK/paths.sy" && [[ -s "$WORK/paths.sy" ]]; then
  ok "netlink and sysfs exporters: identical hw_counters series and values ($(grep -c "^$HW_METRIC" "$WORK/sy1") raw series)"
else
  bad "netlink and sysfs paths differ: $(diff "$WORK/paths.nl" "$WORK/paths.sy" | head -c 2000)"
fi
scrape "$WORK/sy2"
n_files=0
for dev in "${DEVS[@]}"; do n_files=$((n_files + $(ls /sys/class/infiniband/$dev/ports/1/hw_counters | wc -l))); done
sy_sys=$(( $(reads "$WORK/sy2" sysfs) - $(reads "$WORK/sy1" sysfs) ))
sy_req=$(( $(reads "$WORK/sy2" netlink) - $(reads "$WORK/sy1" netlink) ))
((sy_sys == n_files)) && ok "sysfs path: $sy_sys file reads per scrape (every file)" || bad "sysfs path: $sy_sys reads per scrape, expected $n_files"
((sy_req == 0)) && ok "sysfs path: no netlink requests" || bad "sysfs path: $sy_req netlink requests"

bench sysfs

finish
