#!/bin/bash
# vm test: the prober under idle, dead and vanished peers, in one guest boot.
#   1. idle TCP connections (0, 3, 64) held open to B's responder while A's rotating flows
#      handshake with it: they complete while every one of them is still held (the responder's
#      event loop); the handshake times are printed.
#   2. a peer "a-dead" (sorting first) that answered, then went silent (its address black-holed
#      by a permanent neighbour entry to a MAC nobody has): A's link to b stays up, b loses
#      nothing, and no window reads path or local_port, while b's flows rotate and reconnect.
#   3. A vanishes without a FIN (its TCP to B dropped by FIB rules, then SIGKILL): B's responder
#      frees A's QPs within its keepalive_timeout (8 s here); the time is printed.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"

PORT_C=$((VM_TEST_PORT + 2))
PID_C=
IDLE_FDS=()
stop_all() {
  for p in $PID_A $PID_B $PID_C; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  ip rule del pref 10 2>/dev/null
  ip rule del pref 10 2>/dev/null
}
trap stop_all EXIT
now() { local t; read -r t _ </proc/uptime; printf '%s\n' "$t"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# B: a responder only (no peers), 100 pending connections per source allowed (every local
# connection comes from the one address), keepalive 8 s.
cat >"$WORK/b.yml" <<YAML
collectors:
  prober:
    listen_address: "10.77.0.2:9662"
YAML
# B's pending deadline is 60 s (responder_pending_timeout, within connect_timeout; it probes
# nobody): the idle connections stay pending for the whole of phase 1, however slowly A starts
# under emulation.
"$EXPORTER" --web.listen-address=127.0.0.1:$PORT_B --config.file="$WORK/b.yml" --collector.prober.device="$DEV_B" \
  --path.sysfs=/sys --log.level=debug --collector.prober --collector.prober.connect-timeout=60s \
  --collector.prober.responder-pending-timeout=60s --collector.prober.responder-max-pending-per-source=100 --collector.prober.keepalive-timeout=8s >>"$WORK/exporter_b.log" 2>&1 &
PID_B=$!
wait_for $PORT_B 1 rdma_prober_responder_up || fatal "B's responder is not up"

# C: the peer that will go silent, a responder on a second address of rxe1's netdev.
ip addr add 10.77.0.3/24 dev veth1 || fatal "ip addr add 10.77.0.3"
for i in $(seq 100); do grep -qs "0000:0000:0000:0000:0000:ffff:0a4d:0003" /sys/class/infiniband/rxe1/ports/1/gids/* && break; sleep 0.1; done
cat >"$WORK/c.yml" <<YAML
collectors:
  prober:
    listen_address: "10.77.0.3:9662"
YAML
"$EXPORTER" --web.listen-address=127.0.0.1:$PORT_C --config.file="$WORK/c.yml" --collector.prober.device='^rxe1$' \
  "${COMMON[@]}" >>"$WORK/exporter_c.log" 2>&1 &
PID_C=$!
# A: probes a-dead (C, sorting first) and b, 4 flows each, one flow per link re-created every 2 s:
# a real handshake with B every second or so, started once (an exporter's start is slow under TCG).
cat >"$WORK/a.yml" <<YAML
collectors:
  prober:
    listen_address: "10.77.0.1:9662"
    peers:
      - {address: 10.77.0.3, name: a-dead, tcp_port: 9662}
      - {address: 10.77.0.2, name: b, tcp_port: 9662}
YAML
start_a --collector.prober.flows=4 --collector.prober.flow-rotation=2s --collector.prober.window=5s
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=a-dead && ok "A sees a-dead up" || bad "A: a-dead never up"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: b never up"

section "1. A's handshakes with B go on while idle connections are held to B's responder"
for n in 0 3 64; do
  IDLE_FDS=()
  for ((i = 0; i < n; i++)); do
    exec {fd}<>/dev/tcp/10.77.0.2/9662 || break
    IDLE_FDS+=("$fd")
  done
  wait_at_least $PORT_B "$n" rdma_prober_responder_pending || bad "B does not hold $n pending connections"
  scrape_port $PORT_A "$WORK/a_idle0"
  c0=$(value "$WORK/a_idle0" rdma_prober_connects_total device=rxe0 port=1 peer=b)
  t0=$(now)
  if wait_at_least $PORT_A "$((c0 + 2))" rdma_prober_connects_total device=rxe0 port=1 peer=b; then
    t1=$(now)
    scrape_port $PORT_B "$WORK/b_idle"
    held=$(value "$WORK/b_idle" rdma_prober_responder_pending)
    cd=$(value "$WORK/poll" rdma_prober_connect_duration_seconds device=rxe0 port=1 peer=b)
    echo "  measured: $n idle connections held: 2 handshakes of A with B done in $(elapsed "$t0" "$t1") s, the last took $cd s"
    if num_ge "$held" "$n"; then ok "A's handshakes completed with all $n idle connections still held"; else bad "$held of $n idle connections held after A's handshakes"; fi
  else
    bad "A made no handshake with B with $n idle connections held"
  fi
  for fd in "${IDLE_FDS[@]}"; do exec {fd}>&-; done
done

section "2. a peer that sorts first goes silent: b's links are not delayed, no path or local_port verdict"
# Silent: C dies, its address leaves the guest and A's packets to it go to a MAC nobody has.
kill -9 "$PID_C"; wait "$PID_C" 2>/dev/null; PID_C=
ip addr del 10.77.0.3/24 dev veth1
ip route add 10.77.0.3/32 dev veth0
ip neigh replace 10.77.0.3 lladdr 02:00:00:00:00:03 dev veth0 nud permanent
scrape_port $PORT_A "$WORK/a_dead0"
c0=$(value "$WORK/a_dead0" rdma_prober_connects_total device=rxe0 port=1 peer=b)
wrong=0 down=0 samples=0 blamed_dead=0
t0=$(now)
# at least 6 samples over at least 15 s (3 windows), at most 60 s
while awk -v a="$t0" -v b="$(now)" -v n=$samples 'BEGIN { exit !(b - a < 60 && (n < 6 || b - a < 15)) }'; do
  scrape_port $PORT_A "$WORK/a_dead" || { sleep 0.5; continue; }
  samples=$((samples + 1))
  get "$WORK/a_dead" rdma_prober_peer_up device=rxe0 port=1 peer=b && [[ $REPLY == 1 ]] || down=$((down + 1))
  for v in path local_port; do
    for x in $(series "$WORK/a_dead" rdma_prober_verdict verdict=$v); do num_eq "$x" 0 || wrong=$((wrong + 1)); done
  done
  [[ -n "$(series "$WORK/a_dead" rdma_prober_blamed verdict=peer subject=a-dead)" ]] && blamed_dead=$((blamed_dead + 1))
  sleep 0.5
done
scrape_port $PORT_A "$WORK/a_dead1"
c1=$(value "$WORK/a_dead1" rdma_prober_connects_total device=rxe0 port=1 peer=b)
lost=$(value "$WORK/a_dead1" rdma_prober_probes_lost_total device=rxe0 port=1 peer=b)
echo "  measured: $samples samples over $(elapsed "$t0" "$(now)") s with a-dead silent: b down in $down, path/local_port verdicts $wrong, a-dead blamed in $blamed_dead; b's connects $c0 -> $c1, lost $lost"
((samples >= 5)) && ok "$samples samples" || bad "only $samples samples"
((wrong == 0)) && ok "no path or local_port verdict while a-dead is silent" || bad "$wrong path/local_port verdicts with only a-dead silent"
((down == 0)) && ok "b stayed up" || bad "b was down in $down samples"
((blamed_dead > 0)) && ok "a-dead blamed as the peer" || bad "a-dead never blamed"
num_ge "$c1" "$((c0 + 2))" && ok "b's rotated flows reconnected meanwhile ($c0 -> $c1)" || bad "b's connects $c0 -> $c1: its flows did not reconnect"
num_eq "$lost" 0 && ok "b lost nothing" || bad "b lost $lost"

section "3. A vanishes without a FIN: B frees its QPs within the keepalive bound"
scrape_port $PORT_B "$WORK/b_qps"
q=$(value "$WORK/b_qps" rdma_prober_qps role=responder)
num_ge "$q" 4 && ok "B's responder holds A's $q QPs" || bad "B's responder holds $q QPs, expected A's 4"
# Both directions of the handshake connections over lo dropped: FIB rules ahead of the local
# table (moved from preference 0 to 100, else it delivers local addresses before any rule).
ip rule add pref 100 lookup local && ip rule del pref 0 lookup local || fatal "ip rule: local table"
ip rule add pref 10 to 10.77.0.2 ipproto tcp dport 9662 blackhole || fatal "ip rule"
ip rule add pref 10 from 10.77.0.2 ipproto tcp sport 9662 blackhole || fatal "ip rule"
kill -9 "$PID_A"; wait "$PID_A" 2>/dev/null; PID_A=
t0=$(now)
if wait_for $PORT_B 0 rdma_prober_qps role=responder; then
  t1=$(now)
  echo "  measured: B freed the QPs of a silently vanished A $(elapsed "$t0" "$t1") s after it vanished (keepalive_timeout 8 s)"
  ok "B freed A's QPs"
else
  bad "B still holds A's QPs"
fi
scrape_port $PORT_B "$WORK/b_dead"
d=$(value "$WORK/b_dead" rdma_prober_responder_dead_peers_total)
num_ge "$d" 1 && ok "counted as dead peers ($d)" || bad "dead_peers_total $d"
cat "$WORK/exporter_b.log" "$WORK/exporter_c.log" >>"$WORK/exporter.log" 2>/dev/null
finish
