#!/usr/bin/env bash
# Load bench: CONNS (50) concurrent keep-alive scrapers for DURATION (60 s) against the real
# daemon on loopback with its default web settings, reading a generated sysfs tree
# (tests/lib/sysfs_gen.py). --tls serves HTTPS with basic auth (test certificates from
# tests/hardening/hlib.py). Fails on any socket error or non-200 answer; prints wrk's latency
# distribution (p50/p90/p99), throughput, and the daemon's RSS before and after. Stops the daemon
# by PID.
#   bench/load/run.sh [--exporter PATH] [--duration 60s] [--conns 50] [--threads 2]
#                     [--profile fixtures|demo] [--device-include REGEX] [--gzip] [--tls]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
EXE="$ROOT/build/rdma_exporter"; DURATION=60s; CONNS=50; THREADS=2; PROFILE=fixtures; INCLUDE=""; GZIP=0; TLS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --exporter) EXE="$2"; shift 2 ;;
    --duration) DURATION="$2"; shift 2 ;;
    --conns) CONNS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --profile) PROFILE="$2"; shift 2 ;;
    --device-include) INCLUDE="$2"; shift 2 ;;
    --gzip) GZIP=1; shift ;;
    --tls) TLS=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)" >&2; exit 2; }
W="$(mktemp -d)"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
python3 "$ROOT/tests/lib/sysfs_gen.py" "$W/sys" --profile "$PROFILE" >/dev/null
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# The daemon's default web settings (--web.max-concurrent-scrapes, --web.max-requests): this
# measures what an installed exporter does with CONNS scrapers.
ARGS=(--web.listen-address="127.0.0.1:$PORT" --path.sysfs="$W/sys" --log.level=warn)
[ -n "$INCLUDE" ] && ARGS+=(--device.include="$INCLUDE")
SCHEME=http; CURL=(curl -fsS); HDR=()
if [ "$TLS" = 1 ]; then
  # A Prometheus scraping over TLS with basic auth: certificates and the bcrypt hash as the
  # hardening tests make them.
  PYTHONPATH="$ROOT/tests/hardening" python3 -c '
import sys, hlib
d = sys.argv[1]
hlib.make_certs(d)
with open(d + "/web.yml", "w") as f:
    f.write("tls_server_config:\n  cert_file: %s/server.crt\n  key_file: %s/server.key\n" % (d, d))
    f.write("basic_auth_users:\n  prometheus: \"%s\"\n" % hlib.bcrypt("s3cret"))
' "$W"
  ARGS+=(--web.config.file="$W/web.yml")
  SCHEME=https
  CURL=(curl -fsS --cacert "$W/ca.crt" -u prometheus:s3cret)
  HDR=(-H "Authorization: Basic $(printf prometheus:s3cret | base64)")
fi
"$EXE" "${ARGS[@]}" >"$W/exporter.log" 2>&1 &
PID=$!
for _ in $(seq 200); do "${CURL[@]}" "$SCHEME://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
rss() { awk '/VmRSS/ {print $2}' "/proc/$PID/status"; }
"${CURL[@]}" "$SCHEME://127.0.0.1:$PORT/metrics" >/dev/null
RSS0="$(rss)"
LUA="$ROOT/bench/load/report.lua"
[ "$GZIP" = 1 ] && HDR+=(-H "Accept-Encoding: gzip")
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --timeout 30s --latency "${HDR[@]}" -s "$LUA" \
  "$SCHEME://127.0.0.1:$PORT/metrics" | tee "$W/wrk.txt"
RSS1="$(rss)"
SCRAPES="$("${CURL[@]}" "$SCHEME://127.0.0.1:$PORT/metrics" | awk '/^rdma_exporter_scrapes_total/ {print $2}')"
echo "rss_kib_before=$RSS0 rss_kib_after=$RSS1 scrapes_total=$SCRAPES"
kill -0 "$PID" || { echo "FAIL: exporter died"; cat "$W/exporter.log"; exit 1; }
if grep -q "Socket errors" "$W/wrk.txt" || grep -q "Non-2xx" "$W/wrk.txt" || ! grep -q "^non200=0$" "$W/wrk.txt"; then
  echo "FAIL: errors under load"; exit 1
fi
echo "OK: no errors"
