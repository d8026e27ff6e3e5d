# Helpers for the guest-side vm tests (sourced by tests/vm/guest/*.sh).
#
# These scripts run INSIDE the test guest (tests/vm/vm-run.sh), where rxe0 on
# veth0 (10.77.0.1) and rxe1 on veth1 (10.77.0.2) are up and ACTIVE.  They
# start the exporter on the guest's loopback, scrape it with curl and compare
# what it exports with what the kernel says (sysfs, ibv_devices, ...).
#
# Environment:
#   RDMA_EXPORTER_BIN   the exporter binary (default: $VM_BUILD_DIR/rdma_exporter;
#                       vm-run.sh --build DIR sets VM_BUILD_DIR in the guest)
#   VM_TEST_PORT        the exporter's port on 127.0.0.1 (default 9879)
set -uo pipefail

EXPORTER=${RDMA_EXPORTER_BIN:-${VM_BUILD_DIR:+$VM_BUILD_DIR/rdma_exporter}}
[[ -n "$EXPORTER" ]] || { echo "FATAL: set RDMA_EXPORTER_BIN, or run vm-run.sh with --build DIR"; exit 2; }
VM_TEST_PORT=${VM_TEST_PORT:-9879}
VM_TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d /tmp/vmtest.XXXXXX)
CHECKS_OK=0
CHECKS_FAILED=0
EXPORTER_PID=
# ok/bad/section/fatal, scrape and the lookups (value, get, series, expect_value, ...), readf: the
# shell tests' one library. The guest sees the host's checkout read-only at its own path.
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/common.sh"
SCRAPE_URL="http://127.0.0.1:$VM_TEST_PORT/metrics"
EXPORTER_LOG=$WORK/exporter.log

[[ -x "$EXPORTER" ]] || { echo "FATAL: $EXPORTER is not an executable (build the rdma_exporter target)"; exit 2; }

cleanup() {
  if [[ -n "$EXPORTER_PID" ]]; then kill "$EXPORTER_PID" 2>/dev/null; wait "$EXPORTER_PID" 2>/dev/null; fi
}
trap cleanup EXIT

# a typo or a tool missing in the guest is a failed check, not a silent pass
# (bash runs this handler in a subshell: the count goes through a file)
command_not_found_handle() { echo "  FAIL: command not found: $1"; echo "$1" >>"$WORK/not-found"; return 127; }

# finish: print the tally, exit 0 only when every check passed (and some ran)
finish() {
  if [[ -s "$WORK/not-found" ]]; then
    local n; n=$(wc -l <"$WORK/not-found"); CHECKS_FAILED=$((CHECKS_FAILED + n))
  fi
  echo "$VM_TEST_NAME: $CHECKS_OK checks ok, $CHECKS_FAILED failed"
  if ((CHECKS_FAILED > 0 || CHECKS_OK == 0)); then
    echo "--- exporter log:"; cat "$WORK/exporter.log" 2>/dev/null
    exit 1
  fi
  exit 0
}

# start_exporter [FLAGS...]: run the exporter on 127.0.0.1:$VM_TEST_PORT and
# wait (bounded by attempts) until /metrics answers.
start_exporter() {
  "$EXPORTER" --web.listen-address="127.0.0.1:$VM_TEST_PORT" --path.sysfs=/sys --log.level=debug "$@" \
    >"$WORK/exporter.log" 2>&1 &
  EXPORTER_PID=$!
  local i
  for i in $(seq 200); do
    curl -sf -o /dev/null "http://127.0.0.1:$VM_TEST_PORT/metrics" && return 0
    kill -0 "$EXPORTER_PID" 2>/dev/null || fatal "the exporter exited at start ($EXPORTER $*)"
    sleep 0.1
  done
  fatal "the exporter does not answer on 127.0.0.1:$VM_TEST_PORT"
}


# sysfs_port DEV FILE: a port-1 attribute of an RDMA device
sysfs_port() { local v; readf v "/sys/class/infiniband/$1/ports/1/$2" && printf '%s\n' "$v"; }

# wait_port_state DEV WORD: wait (bounded by attempts) until ports/1/state
# names WORD (e.g. "4: ACTIVE"); the kernel learns about a veth carrier change
# through the link watch work, a little after `ip link` returns.
wait_port_state() {
  local i st
  for ((i = 0; i < 100; i++)); do
    readf st "/sys/class/infiniband/$1/ports/1/state" && [[ "$st" == *"$2"* ]] && return 0
    sleep 0.1
  done
  echo "  (port $1/1 state is still '$st', waited for '$2')" >&2
  return 1
}

# settle_hw_counters DEV...: sleep past the hw_counters cache lifetime, so that
# the next read of ports/1/hw_counters is fresh (the kernel serves values
# cached for up to `lifespan` ms).
settle_hw_counters() {
  local ms=0 d l t
  for d in "$@"; do
    readf l "/sys/class/infiniband/$d/ports/1/hw_counters/lifespan" 2>/dev/null || l=0
    ((l > ms)) && ms=$l
  done
  t=$((ms * 2 + 20))
  printf -v t '%d.%03d' $((t / 1000)) $((t % 1000))
  sleep "$t"
}

# hw_collector_name: the exporter's hw_counters collector name, if it has one
hw_collector_name() {
  "$EXPORTER" --help 2>&1 | grep -oE -- '--\[no-\]collector\.hw_?counters?\b' | head -n1 | sed 's/.*collector\.//'
}

# The hw_counters collector's family and counter label (docs/metrics.md).
HW_METRIC=${VM_HW_METRIC:-rdma_hw_counters_total}
HW_LABEL=${VM_HW_LABEL:-counter}

# hw_value FILE DEV COUNTER: the exporter's value of one rxe hw counter
hw_value() { value "$1" "$HW_METRIC" device="$2" port=1 "$HW_LABEL=$3"; }
# hw_get FILE DEV COUNTER: the same into REPLY, without a fork
hw_get() { get "$1" "$HW_METRIC" device="$2" port=1 "$HW_LABEL=$3"; }
# hw_sysfs DEV COUNTER: the kernel's value of the same counter
hw_sysfs() { local v; readf v "/sys/class/infiniband/$1/ports/1/hw_counters/$2" && printf '%s\n' "$v"; }
