#!/usr/bin/env bash
# Regenerates the golden expositions (tests/golden/*.prom) from this checkout's build: builds the
# exporter (only that target), then scrapes every case once (a few seconds). Review the diff series
# by series before committing it (docs/developing.md, "Golden exposition").
#   tests/golden/update.sh [CASE...]     BUILD_DIR: the build tree (default: build/)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$here/build}
[[ -f "$build/CMakeCache.txt" ]] || { echo "update.sh: no build tree at $build (cmake -S . -B build first, or set BUILD_DIR)" >&2; exit 1; }
cmake --build "$build" --target rdma_exporter -j"$(nproc)" >/dev/null
exec python3 "$here/tests/golden/golden.py" update --exporter "$build/rdma_exporter" "$@"
