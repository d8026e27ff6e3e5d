#!/usr/bin/env bash
# Sanitizer builds of the tests (cmake/Sanitizers.cmake: -DRDMA_EXPORTER_SANITIZE=...):
#   asan:  address,undefined over every test but load (timing under load), vm (the guest runs the
#          binary under TCG emulation: minutes more per test) and <label>.deploy.* (packaging): unit,
#          fixtures, hardening, prometheus (real Prometheus and promtool), ibsim, netns
#   tsan:  thread over the threaded parts: HTTP server + scraper + collectors (fixture daemons fan out per device) + prober unit tests
#          (label unit, which includes the hardening Catch2 cases), the daemon's lifecycle and
#          fault tests (real process: signals, reload, scrapes in a loop), and the prober's verbs
#          threads in the Soft-RoCE guest (tests/vm/guest/prober_mesh.sh with the TSan daemon).
# Only the executables those tests run are built (read from `ctest --show-only`); <label>.deploy.* (packaging,
# cpack would build every target) are left out. Sanitizer reports go to build-*/sanitizer-logs/.
# Usage: .ci/sanitizers.sh [asan|tsan|all]   (default all). Time on 2 cores: see docs/security.md.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
JOBS="${JOBS:-2}"
# ccache hits across clones in different folders (as scripts/test.sh).
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
WHAT="${1:-all}"

# Targets behind the ctest commands selected by the label arguments (the command, the built files
# its arguments name, and the files it requires from the build tree, such as a preloaded test
# library), plus the daemon. A Catch2
# executable that is not built yet is listed only as one unlabelled "<target>_NOT_BUILT-<hash>"
# test (catch_discover_tests lists its cases, with their labels, after the build), which no label
# selection picks: those executables are taken from an unfiltered listing and built in pass 1.
targets_for() {
  local build="$1"; shift
  (cd "$build" && ctest --show-only=json-v1 "$@" >"$build/.sel.json" && ctest --show-only=json-v1 >"$build/.all.json")
  # The build system's targets: a built file that an argument names is kept only if it is one.
  cmake --build "$build" --target help | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p' >"$build/.targets"
  python3 -c '
import json, os, re, sys
build = os.path.realpath(sys.argv[1])
names = {"rdma_exporter"}
targets = set(open(os.path.join(build, ".targets")).read().split())
def built(path):  # a file of the build tree, named after its target (<target>, lib: <target>.so)
    if os.path.isabs(path) and os.path.realpath(path).startswith(build + os.sep):
        name = re.sub(r"\.so$", "", os.path.basename(path))
        if name in targets:
            names.add(name)
for t in json.load(open(os.path.join(build, ".sel.json"))).get("tests", []):
    # The command, and every argument that names a built file (a driver passed to a Python or
    # shell test as --driver PATH or --driver=PATH): a selected test never finds its file missing.
    for arg in t.get("command") or []:
        for part in arg.split("=", 1)[-1:] + [arg]:
            built(part)
    # A library a test preloads is one of its REQUIRED_FILES.
    for p in t.get("properties", []):
        if p.get("name") == "REQUIRED_FILES":
            for f in p.get("value") or []:
                built(f)
for t in json.load(open(os.path.join(build, ".all.json"))).get("tests", []):
    m = re.fullmatch(r"(.+)_NOT_BUILT(-[0-9a-f]+)?", t.get("name", ""))
    if m:
        names.add(m.group(1))
print(" ".join(sorted(names)))' "$build"
}

verdict() {  # name build rc "timing": a part fails on a failed test or on any report file left
  local name="$1" build="$2" rc="$3" timing="$4"
  if compgen -G "$build/sanitizer-logs/*" >/dev/null; then
    rc=1
    for f in "$build"/sanitizer-logs/*; do echo "=== $f"; head -80 "$f"; done
  fi
  local v=ok; [ "$rc" -eq 0 ] || { v=FAILED; status=1; }
  results+=("$name $v ($timing)")
  echo "sanitizers[$name]: $v, $timing"
}

run() {  # name sanitize "ctest selection" ["ctest selection" ...]: the union of the selections
  local name="$1" san="$2"; shift 2
  local build="$ROOT/build-$name"
  local t0=$SECONDS sel targets=""
  cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRDMA_EXPORTER_SANITIZE="$san" >/dev/null
  # catch_discover_tests lists a test executable's cases only once it is built: build the
  # executables ctest knows of, then ask again (newly listed cases bring no new executables).
  for pass in 1 2; do
    for sel in "$@"; do
      # shellcheck disable=SC2086
      targets="$targets $(targets_for "$build" $sel)"
    done
    # shellcheck disable=SC2086
    cmake --build "$build" -j"$JOBS" --target $(printf '%s\n' $targets | sort -u)
  done
  local built=$((SECONDS - t0)) rc=0
  # Reports go to files: a daemon started by a Python test may have its stderr swallowed or its
  # exit status ignored (a report at shutdown); any file left here fails the part. Writable by
  # all: hardening.exporter.faults runs its daemon as nobody.
  rm -rf "$build/sanitizer-logs" && mkdir -p -m 1777 "$build/sanitizer-logs"
  for sel in "$@"; do
    # shellcheck disable=SC2086
    (cd "$build" && "$ROOT/scripts/ctest-strict" --output-on-failure -j"$JOBS" $sel) || rc=1
  done
  verdict "$name" "$build" $rc "build ${built}s, tests $((SECONDS - t0 - built))s"
}

# The prober's verbs threads (posting, polling, the completion channel, connector, responder)
# only run against RDMA devices: the TSan daemon also runs the VM's prober mesh test (two
# exporters probing each other over Soft-RoCE, one stopped and restarted). The guest sees the
# build tree read-write at the same path, so reports land in sanitizer-logs/ as on the host.
# The guest runs with the host's PATH: the unpacked test tools (promtool) go first, as ctest puts
# them for the vm tests (without them a fresh host failed this run: "promtool: command not found").
tsan_vm() {
  local build="$ROOT/build-tsan" t0=$SECONDS rc=0 tools
  if tools=$("$ROOT/scripts/test-tools.sh"); then
    PATH="$tools/usr/bin:$tools/usr/sbin:$PATH" "$ROOT/tests/vm/vm-run.sh" --build "$build" --timeout 300 -- \
      env TSAN_OPTIONS="$TSAN_OPTIONS" "$ROOT/tests/vm/guest/prober_mesh.sh" || rc=1
  else
    rc=1
  fi
  verdict tsan-vm "$build" $rc "$((SECONDS - t0))s"
}

case "$WHAT" in asan|tsan|all) ;; *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;; esac
logs() { echo "log_path=$ROOT/build-$1/sanitizer-logs/$2"; }
# verify_asan_link_order=0: the ibsim tests LD_PRELOAD the umad2sim shim ahead of the runtime.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:verify_asan_link_order=0:suppressions=$ROOT/.ci/asan.supp:print_suppressions=0:$(logs asan asan)"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:$(logs asan ubsan)"
export LSAN_OPTIONS="suppressions=$ROOT/.ci/lsan.supp:print_suppressions=0"
# Suppressions: third-party false positives only, each with its reason (tsan.supp).
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/.ci/tsan.supp:$(logs tsan tsan)"
status=0 results=() start=$SECONDS
# The load test's RSS bound means nothing under a sanitizer's allocator; <label>.deploy.* test packaging.
case "$WHAT" in
  asan|all) run asan "address,undefined" "-LE load|vm -E ^[a-z_]+\.deploy\." ;;&
  tsan|all) run tsan "thread" "-L unit|fixtures -LE vm|ibsim|netns|prometheus -E ^[a-z_]+\.deploy\." "-R ^hardening\.exporter\.(lifecycle|faults)$"
            tsan_vm ;;
esac
summary="sanitizers:"; for r in "${results[@]}"; do summary+=" $r;"; done
echo "$summary total $((SECONDS - start))s"
exit $status
