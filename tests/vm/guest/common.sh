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

[[ -x "$EXPORTER" ]] || { echo "FATAL: $EXPORTER is not an executable (build the rdma_exporter target)"; exit 2; }

cleanup() {
  if [[ -n "$EXPORTER_PID" ]]; then kill "$EXPORTER_PID" 2>/dev/null; wait "$EXPORTER_PID" 2>/dev/null; fi
}
trap cleanup EXIT

ok() { echo "  ok: $*"; CHECKS_OK=$((CHECKS_OK + 1)); }
bad() { echo "  FAIL: $*"; CHECKS_FAILED=$((CHECKS_FAILED + 1)); }
section() { echo "== $*"; }
fatal() { echo "FATAL: $*"; [[ -f "$WORK/exporter.log" ]] && { echo "--- exporter log:"; cat "$WORK/exporter.log"; }; exit 1; }

# finish: print the tally, exit 0 only when every check passed (and some ran)
finish() {
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

# scrape FILE: save one /metrics response
scrape() {
  curl -sf -o "$1" "http://127.0.0.1:$VM_TEST_PORT/metrics" || fatal "scrape of /metrics failed"
}

# series FILE NAME [label=value]...: print the values of the samples of NAME
# whose labels include all the given label=value pairs, one per line.
series() {
  local file=$1 name=$2; shift 2
  awk -v name="$name" -v want="$(printf '%s\n' "$@")" '
    BEGIN { n = split(want, w, "\n"); m = 0
            for (i = 1; i <= n; i++) if (w[i] != "") { eq = index(w[i], "="); k[++m] = substr(w[i], 1, eq - 1) "=\"" substr(w[i], eq + 1) "\"" } }
    /^#/ { next }
    {
      sp = match($0, / [^ ]+$/); if (!sp) next
      head = substr($0, 1, sp - 1); val = substr($0, sp + 1)
      br = index(head, "{")
      if (br) { metric = substr(head, 1, br - 1); labels = "," substr(head, br + 1, length(head) - br - 1) "," }
      else { metric = head; labels = ",," }
      if (metric != name) next
      for (i = 1; i <= m; i++) if (index(labels, "," k[i] ",") == 0) next
      print val
    }' "$file"
}

# value FILE NAME [label=value]...: the value of exactly one matching sample,
# or nothing (and a message on stderr) when there are none or several.
value() {
  local v n
  v=$(series "$@")
  n=$(printf '%s' "$v" | grep -c .)
  if ((n != 1)); then echo "  (expected exactly one sample of $2 ${*:3}, found $n)" >&2; return 1; fi
  printf '%s\n' "$v"
}

# num_eq A B: numeric equality (the exposition format may write 1.25e+09)
num_eq() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0 && a != "" && b != "") }'; }
num_ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0 && a != "" && b != "") }'; }

# expect_value FILE WANT NAME [label=value]...: exactly one sample, equal to WANT
expect_value() {
  local file=$1 want=$2; shift 2
  local got
  if got=$(value "$file" "$@"); then
    if num_eq "$got" "$want"; then ok "$* = $got"; else bad "$* = $got, expected $want"; fi
  else
    bad "$* missing or duplicated"
  fi
}

# expect_absent FILE NAME [label=value]...: no such sample
expect_absent() {
  local file=$1; shift
  local v; v=$(series "$file" "$@")
  if [[ -z "$v" ]]; then ok "no $*"; else bad "unexpected sample(s) $*: $(echo $v)"; fi
}

# sysfs_port DEV FILE: a port-1 attribute of an RDMA device
sysfs_port() { cat "/sys/class/infiniband/$1/ports/1/$2"; }

# wait_port_state DEV WORD: wait (bounded by attempts) until ports/1/state
# names WORD (e.g. "4: ACTIVE"); the kernel learns about a veth carrier change
# through the link watch work, a little after `ip link` returns.
wait_port_state() {
  local i
  for i in $(seq 100); do
    grep -q "$2" "/sys/class/infiniband/$1/ports/1/state" && return 0
    sleep 0.1
  done
  echo "  (port $1/1 state is still '$(sysfs_port "$1" state)', waited for '$2')" >&2
  return 1
}

# settle_hw_counters DEV...: sleep past the hw_counters cache lifetime, so that
# the next read of ports/1/hw_counters is fresh (the kernel serves values
# cached for up to `lifespan` ms).
settle_hw_counters() {
  local ms=0 d l
  for d in "$@"; do
    l=$(cat "/sys/class/infiniband/$d/ports/1/hw_counters/lifespan" 2>/dev/null || echo 0)
    ((l > ms)) && ms=$l
  done
  sleep "$(awk -v ms="$ms" 'BEGIN { printf "%.3f", (ms * 2 + 20) / 1000 }')"
}

# hw_collector_name: the exporter's hw_counters collector name, if it has one
hw_collector_name() {
  "$EXPORTER" --help 2>&1 | grep -oE -- '--\[no-\]collector\.hw_?counters?\b' | head -n1 | sed 's/.*collector\.//'
}

# The hw_counters collector's family and counter label (docs/metrics.md).
HW_METRIC=${VM_HW_METRIC:-rdma_hw_counter_total}
HW_LABEL=${VM_HW_LABEL:-counter}

# hw_value FILE DEV COUNTER: the exporter's value of one rxe hw counter
hw_value() { value "$1" "$HW_METRIC" device="$2" port=1 "$HW_LABEL=$3"; }
# hw_sysfs DEV COUNTER: the kernel's value of the same counter
hw_sysfs() { cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2"; }
