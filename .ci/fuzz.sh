#!/usr/bin/env bash
# Builds every libFuzzer target with clang (ASan+UBSan, coverage on all project code) and runs
# each for FUZZ_SECONDS (default 10) on a copy of its corpus (tests/fuzz/corpus/<target>, kept
# unchanged; new inputs go to a temp dir). A crash, leak or UBSan report fails the script and
# leaves the reproducer in $BUILD/fuzz-artifacts. Usage: .ci/fuzz.sh [seconds] [target...]
# Time on 2 cores: build ~4 min cold (ccache: <1 min), then targets x seconds.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BUILD_FUZZ:-$ROOT/build-fuzz}"
SECONDS_EACH="${1:-${FUZZ_SECONDS:-10}}"
shift || true
JOBS="${JOBS:-2}"
# ccache hits across clones in different folders (as scripts/test.sh).
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
start=$SECONDS
# _GLIBCXX_ASSERTIONS: libstdc++'s checks (empty std::optional, index past the end) abort, as in
# cmake/Sanitizers.cmake.
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -D_GLIBCXX_ASSERTIONS"

mkdir -p "$BUILD"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDMA_EXPORTER_FUZZ=ON \
  -DRDMA_EXPORTER_TESTS=OFF -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" >"$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j"$JOBS" --target fuzz_all
built=$((SECONDS - start))
IFS=";" read -r -a ALL <"$BUILD/fuzz_targets.txt" || true  # no trailing newline
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")

rm -rf "$BUILD/fuzz-artifacts" && mkdir -p "$BUILD/fuzz-artifacts"  # only this run's reproducers
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0 failed=0 total_execs=0
summary=()
for t in "${TARGETS[@]}"; do
  exe="$BUILD/tests/fuzz/$t"
  seeds="$ROOT/tests/fuzz/corpus/$t"
  work="$(mktemp -d)"
  log="$BUILD/fuzz-artifacts/$t.log"
  [ -d "$seeds" ] && cp -r "$seeds/." "$work/"
  if "$exe" -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$BUILD/fuzz-artifacts/$t-" "$work" >"$log" 2>&1; then
    execs="$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
    cov="$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
    total_execs=$((total_execs + ${execs:-0}))
    summary+=("$t: ok, ${execs:-?} executions in ${SECONDS_EACH}s, coverage ${cov:-?} edges, corpus $(ls "$work" | wc -l)")
  else
    status=1 failed=$((failed + 1))
    summary+=("$t: FAILED (see $log)")
    tail -40 "$log"
  fi
  rm -rf "$work"
done
printf '%s\n' "${summary[@]}"
echo "fuzz: $((${#TARGETS[@]} - failed))/${#TARGETS[@]} targets ok, $total_execs executions, build ${built}s, runs $((SECONDS - start - built))s (${SECONDS_EACH}s each), total $((SECONDS - start))s"
exit $status
