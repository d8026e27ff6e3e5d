# Shared by the prober vm tests (sourced after common.sh): two exporters in the guest, A probing
# from rxe0 (10.77.0.1) and B from rxe1 (10.77.0.2), each the other's only peer. prober_fabric.sh
# replaces the configs and DEV_A/DEV_B (the device regexes) for the ECMP fabric.

PORT_A=$VM_TEST_PORT
PORT_B=$((VM_TEST_PORT + 1))
PID_A= PID_B=
stop_all() {
  for p in $PID_A $PID_B; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
trap stop_all EXIT

# prober_config DEV_ADDR PEER_ADDR PEER_NAME [LISTEN_PORT]: a YAML config for one instance
prober_config() {
  cat <<YAML
collectors:
  prober:
    listen_address: "$1:${4:-9662}"
    peers:
      - {address: $2, name: $3, tcp_port: 9662, group: vm}
YAML
}
prober_config 10.77.0.1 10.77.0.2 b >"$WORK/a.yml"
prober_config 10.77.0.2 10.77.0.1 a >"$WORK/b.yml"
COMMON=(--path.sysfs=/sys --log.level=debug --collector.prober --collector.prober.interval=200ms
        --collector.prober.timeout=1s --collector.prober.backoff-max=2s --collector.prober.connect-timeout=3s)

DEV_A='^rxe0$' DEV_B='^rxe1$'

# start_a/start_b [FLAGS...]: start instance A/B with the common flags and these
start_a() {
  "$EXPORTER" --web.listen-address=127.0.0.1:$PORT_A --config.file="$WORK/a.yml" --collector.prober.device="$DEV_A" \
    "${COMMON[@]}" "$@" >>"$WORK/exporter.log" 2>&1 &
  PID_A=$!
}
start_b() {
  "$EXPORTER" --web.listen-address=127.0.0.1:$PORT_B --config.file="$WORK/b.yml" --collector.prober.device="$DEV_B" \
    "${COMMON[@]}" "$@" >>"$WORK/exporter_b.log" 2>&1 &
  PID_B=$!
}
# scrape_port PORT FILE: save one /metrics response of the instance on PORT
scrape_port() { curl -sf -o "$2" "http://127.0.0.1:$1/metrics"; }

# wait_for PORT WANT NAME LABELS...: poll (bounded by attempts) until the sample equals WANT
wait_for() { _wait_until num_eq "$@"; }
# wait_at_least PORT MIN NAME LABELS...: the same, until the sample is at least MIN (a counter
# that must move: the snapshot that first shows a link up may come before its first probe)
wait_at_least() { _wait_until num_ge "$@"; }
_wait_until() {
  local cmp=$1 port=$2 want=$3 i v; shift 3
  for i in $(seq 300); do
    if scrape_port "$port" "$WORK/poll" && v=$(value "$WORK/poll" "$@" 2>/dev/null) && "$cmp" "$v" "$want"; then return 0; fi
    sleep 0.1
  done
  echo "  (waited for $* $cmp $want on :$port; last: $(series "$WORK/poll" "$@"))" >&2
  return 1
}
