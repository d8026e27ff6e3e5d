#!/bin/bash
# vm test: end faults on the two-rail ECMP fabric (tests/vm/lib/ecmp-fabric.sh), localized by A.
# B stopped: verdict peer on each rail, B blamed on both; B back: none. A's rail-1 NIC down: rxeA1 leaves ACTIVE,
# verdict local_port on rail 1 with rxeA1/1 the only subject blamed (not its peer), none on rail 2
# and rail 2's link has no lossy flow; up again: none. Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
FLOWS=4
source "$(dirname "$0")/prober_fabric.sh"

start_fabric_pair
wait_verdict "rail1:none rail2:none" && ok "verdict none on both rails with both ends up" || bad "verdict not none at the start"

section "B stopped: verdict peer"
kill "$PID_B"; wait "$PID_B" 2>/dev/null; PID_B=
wait_verdict "rail1:peer rail2:peer" "rail1:peer:b rail2:peer:b" && ok "verdict peer on both rails, B blamed on each and nothing else" \
  || bad "no peer verdict blaming b on both rails with B stopped"
for r in 1 2; do
  link_flows "$WORK/poll" $r lossy && ((REPLY == FLOWS)) && ok "rail $r's link: all $FLOWS flows lossy" \
    || bad "rail $r's link: '$REPLY' lossy flows, expected $FLOWS"
done

section "B back: verdict none"
start_b
wait_verdict "rail1:none rail2:none" && ok "verdict none with B back" || bad "verdict not none after B's restart"

section "A's rail-1 NIC down: verdict local_port on rxeA1/1 only"
"$FABRIC" nic 1 a down || fatal "a1 down"
wait_port_state rxeA1 DOWN && ok "rxeA1 left ACTIVE" || bad "rxeA1 still ACTIVE with a1 down"
wait_verdict "rail1:local_port rail2:none" "rail1:local_port:rxeA1/1" \
  && ok "verdict local_port on rail 1 only, rxeA1/1 blamed and nothing else (not its peer)" \
  || bad "no local_port verdict on rail 1 blaming rxeA1/1 alone with a1 down"
link_flows "$WORK/poll" 2 lossy && ((REPLY == 0)) && ok "rail 2's link: no lossy flow" \
  || bad "rail 2's link: '$REPLY' lossy flows with a1 down"
link_flows "$WORK/poll" 2 judged && ((REPLY == FLOWS)) && ok "rail 2's link: all $FLOWS flows judged" \
  || bad "rail 2's link: '$REPLY' flows judged"

section "A's rail-1 NIC up: verdict none"
"$FABRIC" nic 1 a up || fatal "a1 up"
wait_port_state rxeA1 ACTIVE && ok "rxeA1 ACTIVE again" || bad "rxeA1 not ACTIVE after a1 up"
wait_verdict "rail1:none rail2:none" && ok "verdict none with a1 up" || bad "verdict not none after a1 up"
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
