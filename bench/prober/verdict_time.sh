#!/bin/bash
# Time from a dropped ECMP path to the prober's `path` verdict, and from the heal to `none`, on the
# lab's two-rail fabric (tests/vm/lib/ecmp-fabric.sh), with the default 30 s localization window.
# Each round starts a new A (new QPs: the flows that fled path x in the last round are all on y),
# waits for `none`, drops path x of rail 1 at a different moment of the window, then heals it.
# In the guest, from the source root (~4.5 min):
#   tests/vm/vm-run.sh --build build --timeout 600 -- bench/prober/verdict_time.sh [ROUNDS]
source tests/vm/guest/common.sh
source tests/vm/guest/prober_fabric.sh
COMMON=("${COMMON[@]/--collector.prober.window=${WINDOW_S}s/--collector.prober.window=30s}")
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
start_fabric_pair
for ((round = 1; round <= ${1:-2}; round++)); do
  ((round > 1)) && restart_a
  wait_verdict none || { echo "round $round: no verdict none to start from"; continue; }
  sleep $((round * 9))
  t0=$(date +%s.%N)
  "$FABRIC" drop 1 x || fatal "drop 1 x"
  wait_verdict path && echo "round $round: drop -> path verdict $(since "$t0") s"
  "$FABRIC" heal 1 x || fatal "heal 1 x"
  t0=$(date +%s.%N)
  wait_verdict none && echo "round $round: heal -> none $(since "$t0") s"
done
