#!/usr/bin/env bash
# Load bench: CONNS (100) concurrent keep-alive scrapers for DURATION (60 s) against the real
# daemon on loopback, reading a generated sysfs tree (tests/fixtures/sysfs_gen.py). Fails on any
# socket error or non-200 answer; prints wrk's latency distribution (p50/p90/p99), throughput,
# and the daemon's RSS before and after. Stops the daemon by PID.
#   bench/load/run.sh [--exporter PATH] [--duration 60s] [--conns 100] [--threads 2]
#                     [--profile fixtures|demo] [--device-include REGEX] [--gzip]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
EXE="$ROOT/build/rdma_exporter"; DURATION=60s; CONNS=100; THREADS=2; PROFILE=fixtures; INCLUDE=""; GZIP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --exporter) EXE="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --conns) CONNS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --profile) PROFILE="$2"; shift 2 ;;
    --device-include) INCLUDE="$2"; shift 2 ;;
    --gzip) GZIP=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 2; }
W="$(mktemp -d)"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
python3 "$ROOT/tests/fixtures/sysfs_gen.py" "$W/sys" --profile "$PROFILE" >/dev/null
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# One worker thread per connection (civetweb serves a keep-alive connection on one thread) and
# admission for all of them: this measures serving 100 scrapers, not the 503 path.
ARGS=(--web.listen-address="127.0.0.1:$PORT" --path.sysfs="$W/sys" --web.max-requests=$((CONNS + 8))
      --web.max-concurrent-scrapes="$CONNS" --log.level=warn)
[ -n "$INCLUDE" ] && ARGS+=(--device.include="$INCLUDE")
"$EXE" "${ARGS[@]}" >"$W/exporter.log" 2>&1 &
PID=$!
for _ in $(seq 200); do curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
rss() { awk '/VmRSS/ {print $2}' "/proc/$PID/status"; }
curl -fsS "http://127.0.0.1:$PORT/metrics" >/dev/null
RSS0="$(rss)"
LUA="$ROOT/bench/load/report.lua"
HDR=()
[ "$GZIP" = 1 ] && HDR=(-H "Accept-Encoding: gzip")
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --timeout 30s --latency "${HDR[@]}" -s "$LUA" \
  "http://127.0.0.1:$PORT/metrics" | tee "$W/wrk.txt"
RSS1="$(rss)"
SCRAPES="$(curl -fsS "http://127.0.0.1:$PORT/metrics" | awk '/^rdma_exporter_scrapes_total/ {print $2}')"
echo "rss_kib_before=$RSS0 rss_kib_after=$RSS1 scrapes_total=$SCRAPES"
kill -0 "$PID" || { echo "FAIL: exporter died"; cat "$W/exporter.log"; exit 1; }
if grep -q "Socket errors" "$W/wrk.txt" || grep -q "Non-2xx" "$W/wrk.txt" || ! grep -q "^non200=0$" "$W/wrk.txt"; then
  echo "FAIL: errors under load"; exit 1
fi
echo "OK: no errors"
