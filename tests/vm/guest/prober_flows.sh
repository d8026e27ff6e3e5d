#!/bin/bash
# vm test: ECMP flows. A (rxe0) probes B (rxe1, a responder only) with flows: 4: four RC QPs on
# each side, each sending from its own UDP source port (counted on veth0 by roce_capture.py);
# with flow_rotation 2s the flows are re-created in turn, so the source ports seen keep growing,
# and no probe is counted lost for it; the per-flow window feeds the localization (verdict none).
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"

printf 'collectors:\n  prober:\n    listen_address: "10.77.0.2:9662"\n' >"$WORK/b.yml"  # B probes nobody
L=(device=rxe0 port=1 peer=b)
start_b
start_a --collector.prober.flows=4 --collector.prober.flow-rotation=0s --collector.prober.window=5s
section "four flows per link, one UDP source port each"
wait_for $PORT_A 1 rdma_prober_peer_up "${L[@]}" && ok "A sees b up" || bad "A: peer b never up"
wait_for $PORT_A 4 rdma_prober_qps role=prober && ok "A: 4 prober QPs" || bad "A: not 4 prober QPs"
wait_for $PORT_B 4 rdma_prober_qps role=responder && ok "B: 4 responder QPs" || bad "B: not 4 responder QPs"
/usr/bin/python3 "$(dirname "$0")/roce_capture.py" veth0 3 >"$WORK/cap1" || fatal "capture failed"
sed 's/^/    /' "$WORK/cap1"
ports() { awk -v s="$1" '$1 == s { p[$3] = 1 } END { n = 0; for (k in p) n++; print n }' "$2"; }
n=$(ports 10.77.0.1 "$WORK/cap1"); num_eq "$n" 4 && ok "A's probes: 4 source ports" || bad "A's probes: $n source ports"
n=$(ports 10.77.0.2 "$WORK/cap1"); num_eq "$n" 4 && ok "B's answers: 4 source ports" || bad "B's answers: $n source ports"
scrape_port $PORT_A "$WORK/a1"
expect_value "$WORK/a1" 1 rdma_prober_peer_up "${L[@]}"  # the 4 flows are one peer view
n=$(grep -c '^rdma_prober_rtt_seconds_count{' "$WORK/a1"); num_eq "$n" 1 && ok "one RTT histogram for the link" || bad "$n RTT histograms"

section "localization over the 5 s window: verdict none, 4 flows judged"
wait_for $PORT_A 1 rdma_prober_verdict rail=10.77.0.0/24 verdict=none && ok "verdict none on rail 10.77.0.0/24 (the subnet both ports share)" || bad "no verdict none"
wait_for $PORT_A 4 rdma_prober_link_flows_judged "${L[@]}" && ok "4 flows judged" || bad "not 4 flows judged"
expect_value "$WORK/poll" 0 rdma_prober_link_flows_lossy "${L[@]}"

section "rotation: A restarted with flow_rotation 1s re-creates its flows in turn"
kill "$PID_A"; wait "$PID_A" 2>/dev/null; PID_A=
start_a --collector.prober.flows=4 --collector.prober.flow-rotation=1s
wait_for $PORT_A 4 rdma_prober_qps role=prober && ok "A: 4 prober QPs" || bad "A: not 4 prober QPs"
/usr/bin/python3 "$(dirname "$0")/roce_capture.py" veth0 8 >"$WORK/cap2" || fatal "capture failed"
n=$(ports 10.77.0.1 "$WORK/cap2"); num_ge "$n" 7 && ok "A's probes: $n source ports in 8 s" || bad "A's probes: $n source ports in 8 s"
scrape_port $PORT_A "$WORK/a2"
c=$(value "$WORK/a2" rdma_prober_connects_total "${L[@]}")
num_ge "$c" 8 && ok "A: $c connects (rotations)" || bad "A: $c connects"
lost=$(value "$WORK/a2" rdma_prober_probes_lost_total "${L[@]}")
num_eq "$lost" 0 && ok "A: rotation lost no probe" || bad "A: $lost lost"
finish
