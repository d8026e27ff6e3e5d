#!/bin/bash
# vm test: a dropped ECMP path on the two-rail fabric (tests/vm/lib/ecmp-fabric.sh). A's 8 flows on
# rail 1 spread over paths x and y: the path of each is predicted from its UDP source port (captured
# on a1) with router L1's own route lookup, and checked against the packets L1 sent over each path.
# Path x of rail 1 dropped: the verdict is path on rail 1 and none on rail 2, the lossy flows of rail 1's link are exactly as many
# as crossed x (never more), rail 2's link has none and nothing is blamed; healed: the verdict is
# none again. Prints the time from the drop to the verdict. Runs inside the test guest; see
# tests/vm/README.md.
source "$(dirname "$0")/common.sh"
# A window long enough to hold every flow on x failing although the drop comes up to a few seconds
# after the window began (publishing and scraping under TCG): a flow on x fails within a second or
# two, loses its probes, reconnects with a new QP (a new source port) and may land on y, clean in
# the next window.
WINDOW_S=10
source "$(dirname "$0")/prober_fabric.sh"

start_fabric_pair
section "rail 1's flows spread over x and y"
# 8 flows all on one path happen 1 time in 128: a new A gives new QPs (bounded)
for attempt in 1 2 3 4; do
  mapfile -t sports <<<"$(rail_sports 1)"
  [[ -n "${sports[0]}" ]] || sports=()
  on_x=0 on_y=0
  for p in "${sports[@]}"; do
    case $("$FABRIC" path 1 "$p") in x) on_x=$((on_x + 1)) ;; y) on_y=$((on_y + 1)) ;; esac
  done
  echo "  attempt $attempt: source ports ${sports[*]}: $on_x on x, $on_y on y"
  ((${#sports[@]} == FLOWS && on_x > 0 && on_y > 0)) && break
  restart_a
done
((${#sports[@]} == FLOWS)) && ok "A's rail-1 probes come from $FLOWS source ports" \
  || bad "A's rail-1 probes come from ${#sports[@]} source ports, expected $FLOWS"
((on_x + on_y == FLOWS && on_x > 0 && on_y > 0)) && ok "$on_x flow(s) on x, $on_y on y" || bad "flows on x/y: $on_x/$on_y"

# The router's counters agree with the predicted paths: L1 sends each flow's probes over its path
# (B probes nothing, so nothing else crosses L1 -> R1 but a few neighbour discovery packets).
read -r _ x0 _ y0 <<<"$("$FABRIC" count 1)"
sleep 3
read -r _ x1 _ y1 <<<"$("$FABRIC" count 1)"
dx=$((x1 - x0)) dy=$((y1 - y0))
if ((dx + dy >= 4 * FLOWS)) && awk -v dx=$dx -v dy=$dy -v nx=$on_x -v n=$FLOWS \
     'BEGIN { f = dx / (dx + dy); exit !(f > nx / n - 0.12 && f < nx / n + 0.12) }'; then
  ok "x carried $dx of $((dx + dy)) packets, as $on_x of $FLOWS flows predict"
else
  bad "x carried $dx of $((dx + dy)) packets; $on_x of $FLOWS flows predicted"
fi
wait_verdict "rail1:none rail2:none" && ok "verdict none on both rails before the drop" || bad "verdict not none before the drop"

section "path x of rail 1 dropped: verdict path, the flows on x lossy, rail 2 clean"
# Dropped as a window begins (WINDOW_S above): that window holds every flow on x failing.
next_window || fatal "no localization window closes"
t0=$(date +%s.%N)
"$FABRIC" drop 1 x || fatal "drop 1 x"
if wait_verdict "rail1:path rail2:none"; then
  t1=$(date +%s.%N)
  ok "verdict path on rail 1, none on rail 2"
  echo "  time from the drop to the path verdict: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s" \
       "(window ${WINDOW_S} s, interval 200 ms, the drop at a window's start)"
else
  bad "no path verdict after the drop"
fi
cp "$WORK/poll" "$WORK/d"
link_flows "$WORK/d" 1 lossy && ((REPLY == on_x)) && ok "rail 1's link: $REPLY lossy flow(s) = the $on_x on x" \
  || bad "rail 1's link: '$REPLY' lossy flow(s), $on_x on x"
link_flows "$WORK/d" 1 judged && ((REPLY == FLOWS)) && ok "rail 1's link: $REPLY flows judged" \
  || bad "rail 1's link: '$REPLY' flows judged, expected $FLOWS"
link_flows "$WORK/d" 2 lossy && ((REPLY == 0)) && ok "rail 2's link: no lossy flow" || bad "rail 2's link: '$REPLY' lossy flows"
[[ -z "$(blamed "$WORK/d")" ]] && ok "nothing blamed (no port, no peer)" || bad "blamed: $(blamed "$WORK/d")"
read -r _ x2 _ y2 <<<"$("$FABRIC" count 1)"
((x2 > x1 && y2 > y1)) && ok "L1 still sends over x ($x1 -> $x2) and y ($y1 -> $y2): the drop is silent, past L1" \
  || bad "L1 over x $x1 -> $x2, y $y1 -> $y2"

section "healed: verdict none"
"$FABRIC" heal 1 x || fatal "heal 1 x"
wait_verdict "rail1:none rail2:none" && ok "verdict none on both rails after the heal" || bad "verdict not none after the heal"
for r in 1 2; do
  link_flows "$WORK/poll" $r lossy && ((REPLY == 0)) && ok "rail $r's link: no lossy flow" \
    || bad "rail $r's link: lossy flows '$REPLY' after the heal"
done
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
