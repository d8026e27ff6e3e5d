#!/bin/bash
# Prober benchmark, run INSIDE the Soft-RoCE guest (tests/vm/vm-run.sh), rxe0 <-> rxe1:
#  1. ib_write_lat t_typical (half a round trip) on the same pair, 2-byte writes, 1000 iterations;
#  2. the prober's median RTT: one peer, 20 ms interval, 5 µs buckets, median interpolated from
#     the histogram, for each poll window in WINDOWS (0 = sleep on the completion channel at once);
#  3. the prober's CPU for N peers (N QPs to the responder on rxe1) at 1 probe/s each, per thread
#     (user and system time from /proc/<pid>/task/<tid>/stat) over a measured window; with
#     BEFORE=<binary>, the same for that binary first (an older build, for before/after);
#  4. the TCG slowdown: the same awk loop as bench/prober/calibrate.sh (run that on the host);
#  5. an independent RTT reference at the prober's rates: rdma_write_loop (tests/vm) posting one
#     64-byte write every 20 ms and every 1 ms, post -> completion busy-polled.
# With RTT_ROUNDS=R, 2. and 5. at 20 ms are instead interleaved in one run: R rounds of a prober
# phase and a reference phase (in alternating order), each round's ratio of the medians, and the
# median of those ratios: the guest's speed drifts by tens of percent between runs, not much
# within one round. ONLY=rtt stops after the RTT phases (no CPU phase); ONLY=cpu skips them.
# With FLOWS=K, every peer of the CPU phase has K flows (K QPs): N x K probes per second.
# Usage: tests/vm/vm-run.sh --build build-prober --timeout 420 -- \
#          [env BEFORE=build-prober/rdma_exporter.before WINDOWS="0 50us 100us 200us" FLOWS=4] \
#          bench/prober/run.sh build-prober/rdma_exporter [N] [SECONDS] [RTT_SECONDS]
set -uo pipefail
EXP=${1:?exporter binary}
N=${2:-256}
SECS=${3:-30}
RTT_SECS=${4:-10}
WINDOWS=${WINDOWS:-0 50us 200us}  # poll windows to measure the RTT with, at a 20 ms interval
FLOWS=${FLOWS:-1}
WRITE_LOOP=${WRITE_LOOP:-$(dirname "$EXP")/tests/vm/rdma_write_loop}
W=$(mktemp -d /tmp/bench.XXXXXX)
A= B=
trap 'kill $A $B 2>/dev/null' EXIT
HZ=$(getconf CLK_TCK)

if [ "${ONLY:-}" != cpu ]; then  # the CPU phases do not need it; ib_write_lat has hung once in the guest
  echo "== ib_write_lat rxe0 -> rxe1 (-x 1 -n 1000 -s 2 -F)"
  timeout 120 ib_write_lat -d rxe1 -x 1 -n 1000 -s 2 -F >"$W/lat_srv" 2>&1 &
  sleep 1
  timeout 110 ib_write_lat -d rxe0 -x 1 -n 1000 -s 2 -F 10.77.0.2 >"$W/lat_cli" 2>&1
  wait
  grep -E '^ *2 ' "$W/lat_cli"
  TT=$(awk '/^ *2 +1000/ { print $5 }' "$W/lat_cli")
  echo "t_typical=${TT} us, 2 x t_typical=$(awk -v t="$TT" 'BEGIN { print 2 * t }') us"
fi

BUCKETS=$(awk 'BEGIN { for (i = 5; i <= 250; i += 5) printf "%s%.6f", (i > 5 ? "," : ""), i / 1e6
                        n = split("300 400 500 750 1000 2000 5000 10000 50000 100000", x, " ")
                        for (i = 1; i <= n; i++) printf ",%.6f", x[i] / 1e6 }')
peers_yaml() {  # N entries, all the responder on 10.77.0.2 (one QP each)
  echo "collectors:"; echo "  prober:"; echo "    listen_address: \"10.77.0.1:9662\""; echo "    peers:"
  for i in $(seq "$1"); do echo "      - {address: 10.77.0.2, name: p$i, group: g}"; done
}
start_pair() {  # start_pair BINARY N INTERVAL [EXTRA PROBER FLAGS...]
  local bin=$1 n=$2 iv=$3; shift 3
  peers_yaml "$n" >"$W/a.yml"
  printf 'collectors:\n  prober:\n    listen_address: "10.77.0.2:9662"\n' >"$W/b.yml"
  "$bin" --web.listen-address=127.0.0.1:9891 --config.file="$W/b.yml" --collector.disable-defaults --collector.prober \
    --collector.prober.device='^rxe1$' --collector.prober.responder-max-qps=4096 >"$W/b.log" 2>&1 &
  B=$!
  sleep 1
  "$bin" --web.listen-address=127.0.0.1:9890 --config.file="$W/a.yml" --collector.disable-defaults --collector.prober \
    --collector.prober.device='^rxe0$' --collector.prober.interval="$iv" --collector.prober.max-peers=4096 \
    --collector.prober.max-qps=4096 --collector.prober.buckets="$BUCKETS" "$@" >"$W/a.log" 2>&1 &
  A=$!
}
stop_pair() { kill $A $B; wait $A $B 2>/dev/null; }
rtt_summary() {  # the prober's probes, losses and median RTT from a scrape, and its poll counters
  awk '
    # summed over the peers: buckets by le (in the order of the first series), counts, losses
    /^rdma_prober_rtt_seconds_bucket/ { match($0, /le="[^"]+"/); le = substr($0, RSTART + 4, RLENGTH - 5)
                                        if (!(le in at)) { n++; at[le] = n; b[n] = le }; c[at[le]] += $NF }
    /^rdma_prober_rtt_seconds_count/ { total += $NF }
    /^rdma_prober_probes_lost_total/ { lost += $NF }
    /^rdma_prober_poll_completions_total/ { polled = $NF }
    /^rdma_prober_poll_window_exhausted_total/ { missed = $NF }
    /^rdma_prober_post_seconds_total/ { post = $NF }
    END {
      half = total / 2; prev_b = 0; prev_c = 0
      for (i = 1; i <= n; i++) {
        if (b[i] == "+Inf") break
        if (c[i] >= half) { med = prev_b + (b[i] - prev_b) * (half - prev_c) / (c[i] - prev_c); break }
        prev_b = b[i]; prev_c = c[i]
      }
      printf "probes=%d lost=%d median=%.1f us (interpolated in 5 us buckets); completions found polling=%d, window exhausted=%d; mean time in ibv_post_send %.1f us\n",
             total, lost, med * 1e6, polled, missed, total ? post / total * 1e6 : 0
    }' "$1"
}
prober_rtt() {  # prober_rtt WINDOW INTERVAL PEERS: one prober phase of RTT_SECS, its summary line
  start_pair "$EXP" "$3" "$2" --collector.prober.poll-window="$1"
  sleep "$RTT_SECS"
  scrape >"$W/m1"
  stop_pair
  rtt_summary "$W/m1"
}
reference_rtt() {  # reference_rtt INTERVAL_US: rdma_write_loop's post-to-completion line
  "$WRITE_LOOP" rxe0 rxe1 $((RTT_SECS * 1000000 / $1)) 64 pace "$1" | grep '^post-to-completion'
}
scrape() { curl -sf http://127.0.0.1:9890/metrics; }
threads() {  # "name utime stime" for every thread of a process, clock ticks
  local t; for t in /proc/$1/task/*; do
    printf '%s ' "$(tr ' ' _ <"$t/comm")"; awk '{ print $14, $15 }' "$t/stat"; done 2>/dev/null
}
calibrate() {  # user CPU seconds of the awk loop of bench/prober/calibrate.sh (and wall seconds)
  local TIMEFORMAT='%U %R'; { time awk 'BEGIN { for (i = 0; i < 20000000; i++) s += i }'; } 2>&1 | awk '{ printf "user %.2f s (wall %.2f s)", $1, $2 }'; }

RTT_ROUNDS=${RTT_ROUNDS:-0}
if [ "${ONLY:-}" = cpu ]; then
  :
elif ((RTT_ROUNDS > 0)); then
  echo "== RTT at 20 ms, interleaved: $RTT_ROUNDS rounds of the prober (1 peer, poll window 50us) and rdma_write_loop (${RTT_SECS}s each)"
  for r in $(seq "$RTT_ROUNDS"); do
    # Odd rounds prober first, even rounds reference first: a drift within the run favours neither.
    if ((r % 2)); then p=$(prober_rtt 50us 20ms 1); q=$(reference_rtt 20000)
    else q=$(reference_rtt 20000); p=$(prober_rtt 50us 20ms 1); fi
    pm=$(sed -n 's/.* median=\([0-9.]*\) us.*/\1/p' <<<"$p"); qm=$(sed -n 's/.* median=\([0-9.]*\) us.*/\1/p' <<<"$q")
    echo "round $r: prober $p"
    echo "round $r: reference $q"
    awk -v r="$r" -v p="$pm" -v q="$qm" 'BEGIN { printf "round %d: prober / reference = %.1f / %.1f us = %.3f\n", r, p, q, (q > 0 ? p / q : 0) }' |
      tee -a "$W/ratios"
  done
  sort -t= -k3 -g "$W/ratios" | awk -F'= ' '{ r[NR] = $NF } END {
    m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
    printf "median ratio prober / reference over %d rounds: %.3f (min %.3f, max %.3f)\n", NR, m, r[1], r[NR] }'
else
  # "WINDOW[@INTERVAL[@PEERS]]": also the default window at a 1 ms interval, and with HOT_PEERS
  # QPs at 1 ms each: that many probes per second keep the emulated kernel paths as hot as
  # ib_write_lat's back-to-back ping-pong does, the like-for-like comparison in a TCG guest.
  HOT_PEERS=${HOT_PEERS:-16}
  for wi in $WINDOWS 50us@1ms "50us@1ms@$HOT_PEERS"; do
    IFS=@ read -r win iv peers <<<"$wi"
    iv=${iv:-20ms}; peers=${peers:-1}
    echo "== prober median RTT, poll window $win ($peers peer(s), $iv interval each, ${RTT_SECS}s)"
    prober_rtt "$win" "$iv" "$peers"
  done

  for iv_us in 20000 1000; do
    echo "== reference: rdma_write_loop, one 64 B write every $((iv_us / 1000)) ms, post -> completion (${RTT_SECS}s)"
    reference_rtt "$iv_us"
  done
fi
if [ "${ONLY:-}" = rtt ]; then exit 0; fi

cpu_phase() {  # cpu_phase LABEL BINARY [EXTRA FLAGS...]
  local label=$1 bin=$2; shift 2
  echo "== CPU, $label: $N peers x $FLOWS flow(s) at 1 probe/s each (${SECS}s window after warm-up)"
  start_pair "$bin" "$N" 1s "$@"
  sleep 8
  scrape >"$W/c0"; s0=$(date +%s.%N); threads $A >"$W/ta0"; threads $B >"$W/tb0"
  sleep "$SECS"
  scrape >"$W/c1"; s1=$(date +%s.%N); threads $A >"$W/ta1"; threads $B >"$W/tb1"
  stop_pair
  if ! grep -q '^rdma_prober_links_up [1-9]' "$W/c1"; then echo "no link came up; the logs:"; tail -n 5 "$W/a.log" "$W/b.log"; fi
  local w; w=$(awk -v a="$s0" -v b="$s1" 'BEGIN { print b - a }')
  awk -v w="$w" '
    FNR == 1 { f++ }
    f == 1 && /^rdma_prober_probes_sent_total/ { s0 += $NF }
    f == 2 && /^rdma_prober_probes_sent_total/ { s1 += $NF }
    f == 2 && /^rdma_prober_probes_lost_total/ { lost += $NF }
    f == 2 && /^rdma_prober_links_up / { up = $2 }
    f == 1 && /^rdma_prober_loop_wakeups_total/ { k0 = $2 }  f == 2 && /^rdma_prober_loop_wakeups_total/ { k1 = $2 }
    f == 1 && /^rdma_prober_poll_completions_total/ { p0 = $2 }  f == 2 && /^rdma_prober_poll_completions_total/ { p1 = $2 }
    f == 1 && /^rdma_prober_post_seconds_total/ { q0 = $2 }  f == 2 && /^rdma_prober_post_seconds_total/ { q1 = $2 }
    f == 1 && /^rdma_prober_poll_seconds_total/ { v0 = $2 }  f == 2 && /^rdma_prober_poll_seconds_total/ { v1 = $2 }
    END { printf "links_up=%d probes=%d (%.1f/s) lost=%d window=%.1fs epoll wake-ups=%.1f/s completions found polling=%.1f/s",
                 up, s1 - s0, (s1 - s0) / w, lost, w, (k1 - k0) / w, (p1 - p0) / w
          if (q1 != "") printf " time in ibv_post_send=%.1f us/probe", (q1 - q0) / (s1 - s0) * 1e6
          if (v1 != "") printf " polling=%.1f us/wake-up", (v1 - v0) / (k1 - k0) * 1e6
          printf "\n" }' "$W/c0" "$W/c1"
  if [ -n "${SYSCALLS:-}" ]; then syscalls_per_probe "$bin" "$@"; fi
  for side in a b; do
    awk -v w="$w" -v hz="$HZ" -v side="$side" '
      FNR == 1 { f++ }
      f == 1 { u0[$1] += $2; y0[$1] += $3 }
      f == 2 { u1[$1] += $2; y1[$1] += $3; names[$1] = 1 }
      END {
        printf "  %s (%s): thread   user s   system s   %% of a core (user + system)\n",
               side == "a" ? "prober A, rxe0" : "responder B, rxe1", side == "a" ? "N QPs" : "N responder QPs"
        for (t in names) {
          u = (u1[t] - u0[t]) / hz; y = (y1[t] - y0[t]) / hz; U += u; Y += y
          if (u + y > 0 || t ~ /^prober/) printf "    %-16s %7.2f %9.2f   %6.3f %% (%.3f + %.3f)\n", t, u, y, 100 * (u + y) / w, 100 * u / w, 100 * y / w
        }
        printf "    %-16s %7.2f %9.2f   %6.3f %% (%.3f + %.3f)\n", "process", U, Y, 100 * (U + Y) / w, 100 * U / w, 100 * Y / w
      }' "$W/t${side}0" "$W/t${side}1"
  done
}
syscalls_per_probe() {  # the loop thread's system calls per probe, counted by strace over 10 s
  start_pair "$1" "$N" 1s "${@:2}"
  sleep 8
  local t s0 s1
  for t in /proc/$A/task/*; do [ "$(cat "$t/comm")" = prober-loop ] && t=${t##*/} && break; done
  s0=$(scrape | awk '/^rdma_prober_probes_sent_total/ { s += $NF } END { print s }')
  timeout -s INT 10 strace -c -p "$t" 2>"$W/strace" >/dev/null
  s1=$(scrape | awk '/^rdma_prober_probes_sent_total/ { s += $NF } END { print s }')
  stop_pair
  echo "  system calls of prober-loop per probe (strace -c, 10 s, $((s1 - s0)) probes):"
  # strace -c columns: % time, seconds, usecs/call, calls, [errors,] syscall
  awk -v n=$((s1 - s0)) '$1 ~ /^[0-9.]+$/ && $NF != "total" { printf "    %-14s %8d calls  %.3f per probe\n", $NF, $4, $4 / n }' "$W/strace"
}
FLOW_ARGS=()  # both builds with the same flows: the same probes per second
if ((FLOWS > 1)); then FLOW_ARGS=(--collector.prober.flows="$FLOWS"); fi
if [ -n "${BEFORE:-}" ]; then cpu_phase "before ($BEFORE)" "$BEFORE" "${FLOW_ARGS[@]}"; fi
cpu_phase "after ($EXP, default poll window)" "$EXP" "${FLOW_ARGS[@]}"

echo "== calibration (compare: bench/prober/calibrate.sh on the host)"
echo "awk loop of 2e7 iterations: $(calibrate); $(calibrate)"
B=$(dirname "$EXP")/bench
for i in 1 2 3; do echo "C++, the loop's logic: $("$B/bench_prober_engine" 256 600 5 4 | tail -1)"; done
for i in 1 2 3; do echo "kernel, a timer wake-up: $("$B/bench_prober_wake" 5000 200)"; done
