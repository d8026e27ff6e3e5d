#!/bin/bash
# vm test: the configured traffic class is on the wire. A (rxe0, 10.77.0.1) has traffic_class
# 106 (NCCL_IB_TC=106: DSCP 26, ECN capable), B (rxe1, 10.77.0.2) 40 (DSCP 10); they probe each
# other. Every RoCE v2 packet on veth0 from 10.77.0.1 (A's probes and A's answers to B's probes)
# carries TOS 106, every one from 10.77.0.2 TOS 40, counted by an AF_PACKET capture
# (roce_capture.py). Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"

start_a --collector.prober.traffic-class=106 --collector.prober.service-level=3
start_b --collector.prober.traffic-class=40
section "both probe each other"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: peer b never up"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxe1 port=1 peer=a && ok "B sees a up" || bad "B: peer a never up"

section "RoCE v2 packets on veth0 by source and TOS (3 s capture)"
/usr/bin/python3 "$(dirname "$0")/roce_capture.py" veth0 3 >"$WORK/tos" || fatal "capture failed"
sed 's/^/    /' "$WORK/tos"
# count SOURCE TOS: packets of that source with that TOS; other SOURCE TOS: with any other
count() { awk -v s="$1" -v t="$2" '$1 == s && $2 == t { n += $4 } END { print n + 0 }' "$WORK/tos"; }
other() { awk -v s="$1" -v t="$2" '$1 == s && $2 != t { n += $4 } END { print n + 0 }' "$WORK/tos"; }
# 200 ms interval: about 15 probes and 15 answers each way in 3 s
for side in "10.77.0.1 106 A" "10.77.0.2 40 B"; do
  read -r src tos name <<<"$side"
  n=$(count "$src" "$tos"); x=$(other "$src" "$tos")
  if num_ge "$n" 10; then ok "$name: $n packets from $src with TOS $tos"; else bad "$name: only $n packets from $src with TOS $tos"; fi
  if num_eq "$x" 0; then ok "$name: none from $src with another TOS"; else bad "$name: $x packets from $src with another TOS"; fi
done
finish
