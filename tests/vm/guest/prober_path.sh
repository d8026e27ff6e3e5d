#!/bin/bash
# vm test: the prober on the two-rail ECMP fabric (tests/vm/lib/ecmp-fabric.sh). A's flows of rail 1
# spread over paths x and y (the path of each QP predicted from its UDP source port with the routers'
# own route lookup, and checked against the packets the router sent over each path); path x of rail 1
# dropped: the flows that lose probes are exactly those that crossed x, rail 2 loses nothing;
# healed: nothing lost. Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_fabric.sh"

start_fabric_pair
section "rail 1's flows spread over x and y"
# 8 flows all on one path happen 1 time in 128: a new A gives new QPs (bounded)
for attempt in 1 2 3 4; do
  mapfile -t qpns <<<"$(rail_qpns 1)"
  [[ -n "${qpns[0]}" ]] || qpns=()
  on_x=0 on_y=0
  for q in "${qpns[@]}"; do
    case $("$FABRIC" path 1 $q) in x) on_x=$((on_x + 1)) ;; y) on_y=$((on_y + 1)) ;; esac
  done
  echo "  attempt $attempt: QPs (local remote) ${qpns[*]}: $on_x on x, $on_y on y"
  ((${#qpns[@]} == FLOWS && on_x > 0 && on_y > 0)) && break
  restart_a
done
((${#qpns[@]} == FLOWS)) && ok "A has $FLOWS RC QPs on rxeA1" || bad "A has ${#qpns[@]} RC QPs on rxeA1, expected $FLOWS"
((on_x + on_y == FLOWS && on_x > 0 && on_y > 0)) && ok "$on_x flow(s) on x, $on_y on y" || bad "flows on x/y: $on_x/$on_y"

# The router's counters agree with the predicted paths: A -> B, L1 sends each flow's probes over its
# path (B probes nothing, so nothing else crosses L1 -> R1 but a few neighbour discovery packets).
read -r _ x0 _ y0 <<<"$("$FABRIC" count 1)"
scrape_port $PORT_A "$WORK/c0"
sleep 3
read -r _ x1 _ y1 <<<"$("$FABRIC" count 1)"
dx=$((x1 - x0)) dy=$((y1 - y0))
echo "  L1 sent $dx packets over x, $dy over y"
if ((dx + dy >= 4 * FLOWS)) && awk -v dx=$dx -v dy=$dy -v nx=$on_x -v n=$FLOWS \
     'BEGIN { f = dx / (dx + dy); exit !(f > nx / n - 0.12 && f < nx / n + 0.12) }'; then
  ok "x carried $dx of $((dx + dy)) packets, as $on_x of $FLOWS flows predict"
else
  bad "x carried $dx of $((dx + dy)) packets; $on_x of $FLOWS flows predicted"
fi

section "path x of rail 1 dropped: the flows on x lose probes, the others and rail 2 do not"
scrape_port $PORT_A "$WORK/d0"
"$FABRIC" drop 1 x || fatal "drop 1 x"
# every flow on x loses within a timeout (1 s) of its next probe; bounded by attempts
for i in $(seq 300); do
  scrape_port $PORT_A "$WORK/d1"
  n=$(lossy_flows "$WORK/d0" "$WORK/d1" 1)
  ((n >= on_x)) && break
  sleep 0.1
done
sleep 2  # the flows on y keep probing: none of them may lose
scrape_port $PORT_A "$WORK/d2"
n1=$(lossy_flows "$WORK/d0" "$WORK/d2" 1)
n2=$(lossy_flows "$WORK/d0" "$WORK/d2" 2)
flow_lost "$WORK/d2" 1; echo "    lost per flow of rail 1: ${LOST[*]}"
((n1 == on_x)) && ok "rail 1: $n1 flow(s) lossy = the $on_x on x" || bad "rail 1: $n1 flow(s) lossy, $on_x on x"
((n2 == 0)) && ok "rail 2: no flow lossy" || bad "rail 2: $n2 flow(s) lossy"
read -r _ x2 _ y2 <<<"$("$FABRIC" count 1)"
((x2 > x1 && y2 > y1)) && ok "L1 still sends over x ($x1 -> $x2) and y ($y1 -> $y2): the drop is silent, past L1" \
  || bad "L1 over x $x1 -> $x2, y $y1 -> $y2"

section "healed: nothing lost"
"$FABRIC" heal 1 x || fatal "heal 1 x"
wait_for $PORT_A $((2 * FLOWS)) rdma_prober_links_up && ok "A: all links up again" || bad "A: links not all up after heal"
# a probe posted just before the heal may still time out: start counting once all links are up
sleep 1
scrape_port $PORT_A "$WORK/h0"
sleep 3
scrape_port $PORT_A "$WORK/h1"
for r in 1 2; do
  n=$(lossy_flows "$WORK/h0" "$WORK/h1" $r)
  ((n == 0)) && ok "rail $r: no flow lossy after the heal" || bad "rail $r: $n flow(s) lossy after the heal"
done
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
