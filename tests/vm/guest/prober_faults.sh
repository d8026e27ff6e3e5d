#!/bin/bash
# vm test: end faults on the two-rail ECMP fabric (tests/vm/lib/ecmp-fabric.sh), seen from A.
# B stopped: every flow of both rails fails (the peer); B back: all up. A's rail-1 netdev down:
# rxeA1 leaves ACTIVE and rail 1's flows fail while rail 2 loses nothing (the local port, on rail
# 1 only); up again: all up. Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
FLOWS=4
source "$(dirname "$0")/prober_fabric.sh"

# links_up FILE RAIL: how many of RAIL's flows are up in a scrape
links_up() {
  local i n=0
  for ((i = 0; i < FLOWS; i++)); do
    get "$1" rdma_prober_peer_up device="rxeA$2" port=1 peer="r$2f$i" 2>/dev/null && ((REPLY == 1)) && n=$((n + 1))
  done
  echo "$n"
}

# wait_rails WANT1 WANT2: poll (bounded by attempts) until rail 1 and rail 2 have that many flows up
wait_rails() {
  local i
  for i in $(seq 300); do
    scrape_port $PORT_A "$WORK/w"
    [[ "$(links_up "$WORK/w" 1) $(links_up "$WORK/w" 2)" == "$1 $2" ]] && return 0
    sleep 0.1
  done
  echo "  (flows up on rails 1 and 2: $(links_up "$WORK/w" 1) $(links_up "$WORK/w" 2), waited for $1 $2)" >&2
  return 1
}

start_fabric_pair

section "B stopped: every flow of both rails fails"
scrape_port $PORT_A "$WORK/p0"
kill "$PID_B"; wait "$PID_B" 2>/dev/null; PID_B=
wait_rails 0 0 && ok "A: no flow up on either rail" || bad "A: flows still up with B stopped"
scrape_port $PORT_A "$WORK/p1"
for r in 1 2; do
  n=$(lossy_flows "$WORK/p0" "$WORK/p1" $r)
  ((n == FLOWS)) && ok "rail $r: all $FLOWS flows lost probes" || bad "rail $r: $n of $FLOWS flows lost probes"
done

section "B back: every flow up again"
start_b
wait_rails $FLOWS $FLOWS && ok "A: all flows up on both rails" || bad "A: not all flows up after B's restart"

section "A's rail-1 netdev down: rail 1 fails, rail 2 loses nothing"
scrape_port $PORT_A "$WORK/n0"
"$FABRIC" nic 1 a down || fatal "a1 down"
wait_port_state rxeA1 DOWN && ok "rxeA1 left ACTIVE" || bad "rxeA1 still ACTIVE with a1 down"
wait_rails 0 $FLOWS && ok "A: rail 1 down, rail 2 up" || bad "A: rail 1/2 not down/up with a1 down"
sleep 2  # rail 2 keeps probing: none of its flows may lose
scrape_port $PORT_A "$WORK/n1"
n=$(lossy_flows "$WORK/n0" "$WORK/n1" 2)
((n == 0)) && ok "rail 2: no flow lost probes" || bad "rail 2: $n flow(s) lost probes with a1 down"

section "A's rail-1 netdev up: every flow up again"
"$FABRIC" nic 1 a up || fatal "a1 up"
wait_port_state rxeA1 ACTIVE && ok "rxeA1 ACTIVE again" || bad "rxeA1 not ACTIVE after a1 up"
wait_rails $FLOWS $FLOWS && ok "A: all flows up on both rails" || bad "A: not all flows up after a1 up"
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
