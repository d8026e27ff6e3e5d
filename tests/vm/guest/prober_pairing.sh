#!/bin/bash
# vm test: rail-aware pairing on the two-rail ECMP fabric (tests/vm/lib/ecmp-fabric.sh). A and B
# name their rails with one rule each (rxeA1, rxeB1 -> rail1; rxeA2, rxeB2 -> rail2) and know each
# other by one address only: A knows B by B's rail-1 address, B knows A by A's rail-2 address.
# From each other's port table they pair exactly rail 1 <-> rail 1 and rail 2 <-> rail 2 (no
# cross-rail link), every link comes up and both rails' routers carry A's probes. Without the
# rules the two sides share no subnet (each rail is routed, 10.r.1.0/24 to 10.r.2.0/24): A pairs
# nothing and says so; with cross_rail it pairs every port with every port.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
FLOWS=1
source "$(dirname "$0")/prober_fabric.sh"

# B probes A too, by A's rail-2 address
printf 'collectors:\n  prober:\n    listen_address: ":9663"\n    rails: %s\n    peers:\n      - {address: 10.2.1.2, name: a, tcp_port: 9662}\n' \
  "$RAILS" >"$WORK/b.yml"

# pairs PORT: the instance's rdma_prober_link_info series as "device>peer_device@rail", sorted on one line
pairs() {
  scrape_port "$1" "$WORK/pairs" || return 1
  grep '^rdma_prober_link_info{' "$WORK/pairs" |
    sed 's/.*device="\([^"]*\)".*peer_device="\([^"]*\)".*rail="\([^"]*\)".*/\1>\2@\3/' | sort | tr '\n' ' ' | sed 's/ $//'
}

start_b
start_a
wait_links_up && ok "A: both links up (rxeA1 and rxeA2 to b)" || bad "A: links not up"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxeB1 port=1 peer=a && wait_for $PORT_B 1 rdma_prober_peer_up device=rxeB2 port=1 peer=a \
  && ok "B: both links up (rxeB1 and rxeB2 to a)" || bad "B: links not up"

section "pairs: rail 1 with rail 1, rail 2 with rail 2, nothing across"
got=$(pairs $PORT_A)
[[ $got == "rxeA1>rxeB1@rail1 rxeA2>rxeB2@rail2" ]] && ok "A: $got" || bad "A's pairs: '$got'"
got=$(pairs $PORT_B)
[[ $got == "rxeB1>rxeA1@rail1 rxeB2>rxeA2@rail2" ]] && ok "B: $got" || bad "B's pairs: '$got'"
wait_for $PORT_A 2 rdma_prober_links && ok "A: 2 links (rails present on both sides x 1 flow)" || bad "A: links not 2"
wait_for $PORT_A 1 rdma_prober_peer_paired peer=b && wait_for $PORT_A 0 rdma_prober_peers_unpaired \
  && ok "A: peer b paired, no peer unpaired" || bad "A: b not paired"
read -r _ x1a _ y1a <<<"$("$FABRIC" count 1)"; read -r _ x2a _ y2a <<<"$("$FABRIC" count 2)"
sleep 3
read -r _ x1b _ y1b <<<"$("$FABRIC" count 1)"; read -r _ x2b _ y2b <<<"$("$FABRIC" count 2)"
r1=$((x1b + y1b - x1a - y1a)) r2=$((x2b + y2b - x2a - y2a))
((r1 >= 10 && r2 >= 10)) && ok "A's probes cross rail 1's router ($r1 packets in 3 s) and rail 2's ($r2)" \
  || bad "packets over rail 1's router $r1, rail 2's $r2"
num_eq "$(value "$WORK/poll" rdma_prober_pairing_failures_total 2>/dev/null || echo 0)" 0 \
  && ok "A: no pairing failure" || bad "A: pairing failures"

section "no rail rules: the sides share no subnet, A pairs nothing"
kill "$PID_A"; wait "$PID_A" 2>/dev/null
sed -i '/rails:/d' "$WORK/a.yml"
start_a
wait_for $PORT_A 0 rdma_prober_peer_paired peer=b && wait_for $PORT_A 1 rdma_prober_peers_unpaired \
  && ok "A: peer b unpaired (its table was read: no subnet in common)" || bad "A: b paired without rules"
wait_for $PORT_A 0 rdma_prober_links && ok "A: no link" || bad "A: links without a rail in common"
[[ -z "$(pairs $PORT_A)" ]] && ok "A: no link_info series" || bad "A: pairs $(pairs $PORT_A)"
grep -q "shares no rail" "$WORK/exporter.log" && ok "A says why (debug log)" || bad "A's log does not say why"

section "cross_rail: every port with every port"
kill "$PID_A"; wait "$PID_A" 2>/dev/null
start_a --collector.prober.cross-rail
wait_for $PORT_A 4 rdma_prober_links && ok "A: 4 links (2 x 2)" || bad "A: not 4 links with cross_rail"
got=$(pairs $PORT_A)
[[ $got == "rxeA1>rxeB1@10.1.1.0/24 rxeA1>rxeB2@10.1.1.0/24 rxeA2>rxeB1@10.2.1.0/24 rxeA2>rxeB2@10.2.1.0/24" ]] \
  && ok "A: $got (the rail label is the local port's subnet)" || bad "A's cross-rail pairs: '$got'"
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
