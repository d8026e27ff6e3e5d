# Shared by the prober vm tests on the two-rail ECMP fabric (tests/vm/lib/ecmp-fabric.sh), sourced
# after common.sh: exporter A probes from rxeA1 (rail 1, 10.1.1.2) and rxeA2 (rail 2, 10.2.1.2)
# with FLOWS flows per link; exporter B answers on rxeB1 (10.1.2.2) and rxeB2 (10.2.2.2) and
# probes nothing. A knows B by one address (rail 1's), as peer b; both name their rails with one
# rule (rxeA1, rxeB1 -> rail1; rxeA2, rxeB2 -> rail2), so A pairs rxeA1 with rxeB1 and rxeA2 with
# rxeB2 from B's port table, and the verdicts are per rail.

source "$(dirname "${BASH_SOURCE[0]}")/prober_pair.sh"
FABRIC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)/ecmp-fabric.sh
CAPTURE=$(dirname "${BASH_SOURCE[0]}")/roce_capture.py
FLOWS=${FLOWS:-8}
WINDOW_S=${WINDOW_S:-5}  # localization window: 25 probes per flow per 5 s at the 200 ms interval

# FABRIC_LAYOUT: "direct" (two paths, the default) or "spines" (three, through spine routers)
"$FABRIC" up 2 "${FABRIC_LAYOUT:-direct}" || fatal "the ECMP fabric did not come up"

RAILS='[{rail: "rail$1", device: "^rxe[AB]([0-9]+)$"}]'
cat >"$WORK/a.yml" <<YAML
collectors:
  prober:
    listen_address: ":9662"
    rails: $RAILS
    peers:
      - {address: 10.1.2.2, name: b, tcp_port: 9663}
YAML
printf 'collectors:\n  prober:\n    listen_address: ":9663"\n    rails: %s\n' "$RAILS" >"$WORK/b.yml"
DEV_A='rxeA[0-9]+' DEV_B='rxeB[0-9]+'  # a full match
# flows keep their QP (and path) unless they fail; the prober alone (a small scrape is fast to read
# in bash under TCG)
COMMON+=(--collector.prober.flows=$FLOWS --collector.prober.flow-rotation=0s --collector.prober.window=${WINDOW_S}s
         --no-collector.hw_counters --no-collector.netdev --no-collector.pma --no-collector.port)

# wait_links_up: until both of A's links are up with all their flows connected
wait_links_up() {
  wait_for $PORT_A $((2 * FLOWS)) rdma_prober_qps role=prober &&
    wait_for $PORT_A 1 rdma_prober_peer_up device=rxeA1 port=1 peer=b &&
    wait_for $PORT_A 1 rdma_prober_peer_up device=rxeA2 port=1 peer=b
}

# start_fabric_pair: B, then A; waits until all of A's flows are connected
start_fabric_pair() {
  start_b
  start_a
  wait_links_up || fatal "A: not all $((2 * FLOWS)) flows up"
}

# restart_a: a new A (new QPs, new source ports)
restart_a() {
  kill "$PID_A"; wait "$PID_A" 2>/dev/null
  start_a
  wait_links_up || fatal "A: not all $((2 * FLOWS)) flows up after a restart"
}

# rail_sports RAIL: the UDP source ports of A's probes on RAIL, captured on a<RAIL> for 3 s, one a line
rail_sports() {
  /usr/bin/python3 "$CAPTURE" "a$1" 3 | while read -r src _ sport _; do
    [[ $src == "10.$1.1.2" ]] && echo "$sport"
  done
}

# link_flows FILE RAIL KIND: A's link on RAIL, flows judged or lossy in the last window (REPLY)
link_flows() { get "$1" "rdma_prober_link_flows_$3" device="rxeA$2" port=1 peer=b; }

# verdicts FILE: the verdict series equal to 1, "rail:verdict" sorted on one line
verdicts() {
  grep '^rdma_prober_verdict{' "$1" | awk '$NF == 1' | sed 's/.*rail="\([^"]*\)".*verdict="\([^"]*\)".*/\1:\2/' |
    sort | tr '\n' ' ' | sed 's/ $//'
}

# wait_verdict WANT [BLAMED]: poll (bounded by attempts) until the verdicts are exactly WANT (as
# `verdicts` prints them, e.g. "rail1:path rail2:none") and, given BLAMED, the blamed subjects are
# exactly that (as `blamed` prints them): a fault that begins inside a window can show part of its
# picture there; the last scrape stays in $WORK/poll
wait_verdict() {
  local i got= b=
  for i in $(seq 400); do
    if scrape_port $PORT_A "$WORK/poll"; then
      got=$(verdicts "$WORK/poll")
      (($# > 1)) && b=$(blamed "$WORK/poll")
      [[ "$got" == "$1" && "$b" == "${2-}" ]] && return 0
    fi
    sleep 0.1
  done
  echo "  (verdicts still '$got', blamed '$b'; waited for '$1'${2+, blamed '$2'})" >&2
  return 1
}

# windows FILE: localization windows closed so far (REPLY)
windows() { get "$1" rdma_prober_localization_windows_total; }

# next_window: poll (bounded by attempts) until a localization window closes; its scrape is $WORK/poll
next_window() {
  local i w0
  scrape_port $PORT_A "$WORK/poll" && windows "$WORK/poll" || return 1
  w0=$REPLY
  for i in $(seq 300); do
    scrape_port $PORT_A "$WORK/poll" && windows "$WORK/poll" && ((REPLY > w0)) && return 0
    sleep 0.05
  done
  return 1
}

# blamed FILE: the subjects blamed in a scrape, "rail:verdict:subject" sorted on one line
blamed() {
  grep '^rdma_prober_blamed{' "$1" | sed 's/.*rail="\([^"]*\)".*verdict="\([^"]*\)".*subject="\([^"]*\)".*/\1:\2:\3/' |
    sort | tr '\n' ' ' | sed 's/ $//'
}
