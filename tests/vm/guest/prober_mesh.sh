#!/bin/bash
# vm test: two exporters in the guest, one probing from rxe0 (10.77.0.1), one from rxe1
# (10.77.0.2), probe each other with RDMA WRITEs: RTT histograms grow, RTTs > 0, nothing lost.
# Stopping one makes the other count losses and mark the peer down; starting it again
# reconnects and probes resume. Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

source "$(dirname "$0")/prober_pair.sh"

start_a
start_b
section "both instances probe each other"
wait_for $PORT_A 1 rdma_prober_active && ok "A: prober active" || bad "A: prober not active"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: peer b never up"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxe1 port=1 peer=a && ok "B sees a up" || bad "B: peer a never up"
scrape_port $PORT_A "$WORK/a1"; scrape_port $PORT_B "$WORK/b1"
sleep 2
scrape_port $PORT_A "$WORK/a2"; scrape_port $PORT_B "$WORK/b2"
for side in a b; do
  if [[ $side == a ]]; then L=(device=rxe0 port=1 peer=b); else L=(device=rxe1 port=1 peer=a); fi
  c1=$(value "$WORK/${side}1" rdma_prober_rtt_seconds_count "${L[@]}")
  c2=$(value "$WORK/${side}2" rdma_prober_rtt_seconds_count "${L[@]}")
  sum=$(value "$WORK/${side}2" rdma_prober_rtt_seconds_sum "${L[@]}")
  lost=$(value "$WORK/${side}2" rdma_prober_probes_lost_total "${L[@]}")
  sent=$(value "$WORK/${side}2" rdma_prober_probes_sent_total "${L[@]}")
  echo "  $side: rtt count $c1 -> $c2, sum $sum s, sent $sent, lost $lost"
  if num_ge "$c2" "$((c1 + 3))"; then ok "$side: histogram count grows ($c1 -> $c2)"; else bad "$side: histogram count $c1 -> $c2"; fi
  if awk -v s="$sum" 'BEGIN { exit !(s > 0) }'; then ok "$side: RTT sum > 0"; else bad "$side: RTT sum $sum"; fi
  if num_eq "$lost" 0; then ok "$side: nothing lost"; else bad "$side: $lost lost"; fi
  if num_ge "$sent" "$c2"; then ok "$side: sent >= completed"; else bad "$side: sent $sent < completed $c2"; fi
done
expect_value "$WORK/a2" 1 rdma_prober_qps role=prober
expect_value "$WORK/a2" 1 rdma_prober_qps role=responder
# At least B's handshake: a connect that B gave up on while A's answer was under way (a slow,
# loaded guest) is answered ok too and retried, so the exact count depends on timing.
hs=$(value "$WORK/a2" rdma_prober_responder_handshakes_total result=ok)
if num_ge "$hs" 1; then ok "A's responder answered $hs handshake(s) ok"; else bad "A's responder answered none ok ($hs)"; fi
# the prober's families only: other collectors are checked by their own tests (promtool is the
# host's, installed by scripts/install-deps.sh; missing, it fails here)
grep -E '^(# (HELP|TYPE) )?rdma_prober_' "$WORK/a2" >"$WORK/a2.prober"
promtool check metrics <"$WORK/a2.prober" >"$WORK/promtool" 2>&1 && ok "promtool check metrics (prober families)" || { bad "promtool"; cat "$WORK/promtool"; }

section "B stops: A counts losses and marks b down"
kill "$PID_B"; wait "$PID_B" 2>/dev/null; PID_B=
wait_for $PORT_A 0 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A marks b down" || bad "A: b still up"
for i in $(seq 100); do
  scrape_port $PORT_A "$WORK/a3"
  lost=$(value "$WORK/a3" rdma_prober_probes_lost_total device=rxe0 port=1 peer=b)
  num_ge "$lost" 1 && break
  sleep 0.1
done
if num_ge "$lost" 1; then ok "A counted $lost lost probe(s)"; else bad "A counted no loss"; fi
series "$WORK/a3" rdma_prober_errors_total device=rxe0 peer=b >/dev/null
grep '^rdma_prober_errors_total' "$WORK/a3" | sed 's/^/    /'
[[ -n "$(series "$WORK/a3" rdma_prober_errors_total device=rxe0 port=1 peer=b)" ]] && ok "A: errors counted by reason" || bad "A: no errors_total"

section "B restarts: A reconnects and probes again"
start_b
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up again" || bad "A: b never came back"
scrape_port $PORT_A "$WORK/a4"
c4=$(value "$WORK/a4" rdma_prober_rtt_seconds_count device=rxe0 port=1 peer=b)
sleep 1.5
scrape_port $PORT_A "$WORK/a5"
c5=$(value "$WORK/a5" rdma_prober_rtt_seconds_count device=rxe0 port=1 peer=b)
conns=$(value "$WORK/a5" rdma_prober_connects_total device=rxe0 port=1 peer=b)
if num_ge "$c5" "$((c4 + 2))"; then ok "A probes b again ($c4 -> $c5)"; else bad "A: count $c4 -> $c5 after restart"; fi
if num_ge "$conns" 2; then ok "A connected $conns times"; else bad "A: connects_total $conns"; fi
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
