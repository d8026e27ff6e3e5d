#!/usr/bin/env bash
# README command 1: install what building and running need (scripts/install-deps.sh: no test tool,
# no service started or enabled), build, and run the exporter — on this host's RDMA devices, or on
# the bundled demo fabric when the host has none.
#   scripts/run.sh [exporter flags...]     e.g. scripts/run.sh --web.listen-address=127.0.0.1:9661
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
"$here/scripts/install-deps.sh"
# A new build tree leaves the tests out (Catch2 is a test package); an existing one keeps its choice
# (scripts/test.sh turns them on).
tests=()
[ -f "$build/CMakeCache.txt" ] || tests=(-DRDMA_EXPORTER_TESTS=OFF)
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${tests[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target rdma_exporter

args=("$@")
addr=":9661"
for a in "${args[@]}"; do case $a in --web.listen-address=*) addr=${a#*=} ;; esac; done
host=${addr%:*}; port=${addr##*:}; [ -n "$host" ] || host=localhost

if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
  echo "rdma_exporter: RDMA devices found: $(ls /sys/class/infiniband | tr '\n' ' ')"
  echo "rdma_exporter: open http://$host:$port/metrics"
  exec "$build/rdma_exporter" "${args[@]}"
fi

demo=${DEMO_DIR:-${TMPDIR:-/tmp}/rdma_exporter-demo-sys}
echo "rdma_exporter: no RDMA device on this host; serving the bundled demo fabric from $demo"
# demo-fabric.sh renames the finished tree into place: wait for it (not for a previous run's tree).
rm -rf "$demo"
"$here/scripts/demo-fabric.sh" "$demo" & ticker=$!
trap 'kill $ticker 2>/dev/null || true' EXIT INT TERM
while [ ! -e "$demo" ]; do sleep 0.1; done
echo "rdma_exporter: open http://$host:$port/metrics  (counters move every second; Ctrl-C stops)"
"$build/rdma_exporter" --path.sysfs="$demo" "${args[@]}"
