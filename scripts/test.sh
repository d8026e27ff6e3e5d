#!/usr/bin/env bash
# README command 2: install what is missing (scripts/install-deps.sh --test: every tool the tests
# use; no service started or enabled), build, and run the whole test suite (every label). Exits
# non-zero when any test fails or does not run to a verdict (skipped: see scripts/ctest-strict and
# tests/skips-allowed.txt).
#   scripts/test.sh [ctest args...]      e.g. scripts/test.sh -L unit
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
# ccache hits across clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR=$here CCACHE_NOHASHDIR=1
"$here/scripts/install-deps.sh" --test
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDMA_EXPORTER_TESTS=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
# One test per core: most host tests wait on sockets, daemons and timers, not the CPU. The vm tests
# run alone all the same (RUN_SERIAL: tests/vm/CMakeLists.txt), and RESOURCE_LOCKs keep tests that
# share a namespace, image store or port apart.
"$here/scripts/ctest-strict" --output-on-failure --timeout 900 -j"$(nproc)" "$@"
