#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite (every label:
# unit, fixtures, prometheus, vm, ibsim, netns). Exits non-zero when any test fails or does not run
# to a verdict (skipped: see scripts/ctest-strict and tests/skips-allowed.txt).
#   scripts/test.sh [ctest args...]      e.g. scripts/test.sh -L unit
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
# ccache hits across clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR=$here CCACHE_NOHASHDIR=1
"$here/scripts/install-deps.sh"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
"$here/scripts/ctest-strict" --output-on-failure --timeout 900 "$@"
