# Shared by the prober vm tests on the two-rail ECMP fabric (tests/vm/lib/ecmp-fabric.sh), sourced
# after common.sh: exporter A probes from rxeA1 (rail 1, 10.1.1.2) and rxeA2 (rail 2, 10.2.1.2);
# exporter B answers on rxeB1 (10.1.2.2) and rxeB2 (10.2.2.2) and probes nothing, so that every RC
# QP on A's devices is one of A's flows. A is given B's address on each rail FLOWS times, as peers
# r<rail>f<i> bound to the rail's device: each entry is one RC QP, i.e. one flow (one UDP source
# port) of the rail's link, which ECMP puts on path x or y.

source "$(dirname "${BASH_SOURCE[0]}")/prober_pair.sh"
FABRIC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)/ecmp-fabric.sh
FLOWS=${FLOWS:-8}

"$FABRIC" up 2 || fatal "the ECMP fabric did not come up"

{
  echo 'collectors:'
  echo '  prober:'
  echo '    listen_address: ":9662"'
  echo '    peers:'
  for r in 1 2; do
    for ((i = 0; i < FLOWS; i++)); do
      echo "      - {address: 10.$r.2.2, name: r${r}f$i, tcp_port: 9663, local_device: rxeA$r, group: rail$r}"
    done
  done
} >"$WORK/a.yml"
printf 'collectors:\n  prober:\n    listen_address: ":9663"\n' >"$WORK/b.yml"
DEV_A='rxeA[0-9]+' DEV_B='rxeB[0-9]+'  # a full match

# start_fabric_pair: B, then A; waits until all of A's links are up
start_fabric_pair() {
  start_b
  start_a
  wait_for $PORT_A $((2 * FLOWS)) rdma_prober_links_up || fatal "A: not all $((2 * FLOWS)) links up"
}

# restart_a: a new A (new QPs, new source ports); waits until all its links are up
restart_a() {
  kill "$PID_A"; wait "$PID_A" 2>/dev/null
  start_a
  wait_for $PORT_A $((2 * FLOWS)) rdma_prober_links_up || fatal "A: not all $((2 * FLOWS)) links up after a restart"
}

# rail_qpns RAIL: the RC QPs on rxeA<RAIL> port 1 (A's flows of that rail), "LQPN RQPN" a line
rail_qpns() {
  rdma resource show qp link "rxeA$1/1" | sed -n 's/.* lqpn \([0-9]*\) rqpn \([0-9]*\) type RC .*/\1 \2/p'
}

# flow_lost FILE RAIL: the lost-probe counter of each of A's flows on RAIL, in flow order, into the
# array LOST (no fork; /dev/fd, and so <(...), does not exist in the guest)
flow_lost() {
  local i
  LOST=()
  for ((i = 0; i < FLOWS; i++)); do
    get "$1" rdma_prober_probes_lost_total device="rxeA$2" port=1 peer="r$2f$i" && LOST+=("$REPLY") || LOST+=(-1)
  done
}

# lossy_flows BEFORE AFTER RAIL: how many of RAIL's flows lost probes between two scrapes
lossy_flows() {
  local -a before
  local i n=0
  flow_lost "$1" "$3"
  before=("${LOST[@]}")
  flow_lost "$2" "$3"
  for ((i = 0; i < FLOWS; i++)); do ((LOST[i] > before[i])) && n=$((n + 1)); done
  echo "$n"
}
