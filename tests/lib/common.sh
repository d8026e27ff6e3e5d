# The shell tests' one library (sourced by tests/vm/guest/common.sh, tests/netdev/netns_test.sh,
# tests/pma/no_umad_device_test.sh, ...): checks counted (ok/bad, tally), an exposition scraped
# and looked up by label=value pairs (scrape, value, get, series, expect_value, expect_absent),
# and the staging of a binary for a test that drops to nobody (stage_unprivileged).
#
# Set before use: SCRAPE_URL (what scrape fetches), optionally SCRAPE_VIA (a command prefix for
# curl) and EXPORTER_LOG (printed by fatal). Counts: CHECKS_OK, CHECKS_FAILED.
# Bash only (associative arrays); no fork on the lookup paths (the VM tests run under TCG).

CHECKS_OK=${CHECKS_OK:-0}
CHECKS_FAILED=${CHECKS_FAILED:-0}
_COMMON_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ok() { echo "  ok: $*"; CHECKS_OK=$((CHECKS_OK + 1)); }
bad() { echo "  FAIL: $*"; CHECKS_FAILED=$((CHECKS_FAILED + 1)); }
section() { echo "== $*"; }
fatal() {
  echo "FATAL: $*"
  [[ -n "${EXPORTER_LOG:-}" && -f "$EXPORTER_LOG" ]] && { echo "--- exporter log:"; cat "$EXPORTER_LOG"; }
  exit 1
}

# tally NAME: print "NAME: N checks ok, M failed"; true only when every check passed (and some ran)
tally() {
  echo "$1: $CHECKS_OK checks ok, $CHECKS_FAILED failed"
  ((CHECKS_FAILED == 0 && CHECKS_OK > 0))
}

# stage_unprivileged BINARY DIR: prints the path to run BINARY as another user (nobody): a copy in
# DIR (made 0755) with the libraries that user could not reach (a checkout under /root, mode
# 0700). tests/lib/unprivileged.py does it; the Python tests use it directly.
stage_unprivileged() { python3 "$_COMMON_LIB/unprivileged.py" stage "$1" "$2"; }

# Scrapes are parsed once, in pure bash, into an index kept in memory: under
# TCG every fork+exec (awk, grep) costs tens of ms, and the tests make
# hundreds of lookups.  The index is keyed by file and content, so a file
# rewritten by other means (curl -o) is parsed again; subshells ($(value ...))
# inherit the index of their parent.
declare -A _IDX_CONTENT=()   # file -> the content that was indexed
declare -A _IDX=()           # "file|metric" -> lines ",labels,<TAB>value"

# _index FILE: (re)build FILE's index when its content changed
_index() {
  local file=$1 content line head val name labels
  content=
  IFS= read -r -d '' content <"$file" || true
  [[ ${_IDX_CONTENT[$file]+set} && "${_IDX_CONTENT[$file]}" == "$content" ]] && return 0
  local k
  for k in "${!_IDX[@]}"; do [[ "$k" == "$file|"* ]] && unset "_IDX[$k]"; done
  while IFS= read -r line; do
    [[ -z "$line" || "$line" == '#'* ]] && continue
    val=${line##* } head=${line% *}
    if [[ "$head" == *'{'* ]]; then
      name=${head%%'{'*} labels=${head#*'{'} labels=${labels%'}'}
    else
      name=$head labels=
    fi
    _IDX["$file|$name"]+=",$labels,"$'\t'"$val"$'\n'
  done <<<"$content"
  _IDX_CONTENT[$file]=$content
}

# _lookup FILE NAME [label=value]...: the values of the matching samples in
# the array _FOUND (no output, no fork)
_lookup() {
  local file=$1 name=$2 entry labels kv want match
  shift 2
  _FOUND=()
  [[ -r "$file" ]] || return 0
  _index "$file"
  while IFS= read -r entry; do
    [[ -z "$entry" ]] && continue
    labels=${entry%%$'\t'*} match=1
    for kv in "$@"; do
      want=",${kv%%=*}=\"${kv#*=}\","
      [[ "$labels" == *"$want"* ]] || { match=0; break; }
    done
    ((match)) && _FOUND+=("${entry#*$'\t'}")
  done <<<"${_IDX[$file|$name]-}"
}

# scrape FILE: save one response of $SCRAPE_URL (and index it); $SCRAPE_VIA, when set, is the
# command curl runs under (e.g. "ip netns exec NS": the exporter listens inside a namespace)
scrape() {
  ${SCRAPE_VIA:-} curl -sf -o "$1" "${SCRAPE_URL:?set SCRAPE_URL before scrape}" || fatal "scrape of $SCRAPE_URL failed"
  _index "$1"
}

# series FILE NAME [label=value]...: print the values of the samples of NAME
# whose labels include all the given label=value pairs, one per line.
series() {
  _lookup "$@"
  ((${#_FOUND[@]})) && printf '%s\n' "${_FOUND[@]}"
  return 0
}

# value FILE NAME [label=value]...: the value of exactly one matching sample,
# or nothing (and a message on stderr) when there are none or several.
value() {
  _lookup "$@"
  if ((${#_FOUND[@]} != 1)); then echo "  (expected exactly one sample of $2 ${*:3}, found ${#_FOUND[@]})" >&2; return 1; fi
  printf '%s\n' "${_FOUND[0]}"
}

# get FILE NAME [label=value]...: like value, but the result goes to REPLY and
# nothing forks (use it where a test makes many lookups)
get() {
  _lookup "$@"
  REPLY=
  if ((${#_FOUND[@]} != 1)); then echo "  (expected exactly one sample of $2 ${*:3}, found ${#_FOUND[@]})" >&2; return 1; fi
  REPLY=${_FOUND[0]}
}

# num_eq A B / num_ge A B: numeric comparisons; integers in bash, anything
# else (1.25e+09, 0.012) or very large in awk
_is_small_int() { [[ "$1" =~ ^-?[0-9]{1,18}$ ]]; }
num_eq() {
  if _is_small_int "$1" && _is_small_int "$2"; then (($1 == $2)); return; fi
  awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0 && a != "" && b != "") }'
}
num_ge() {
  if _is_small_int "$1" && _is_small_int "$2"; then (($1 >= $2)); return; fi
  awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0 && a != "" && b != "") }'
}

# expect_value FILE WANT NAME [label=value]...: exactly one sample, equal to WANT
expect_value() {
  local file=$1 want=$2; shift 2
  _lookup "$file" "$@"
  if ((${#_FOUND[@]} != 1)); then
    bad "$* missing or duplicated (${#_FOUND[@]} samples)"
  elif num_eq "${_FOUND[0]}" "$want"; then
    ok "$* = ${_FOUND[0]}"
  else
    bad "$* = ${_FOUND[0]}, expected $want"
  fi
}

# expect_absent FILE NAME [label=value]...: no such sample
expect_absent() {
  local file=$1; shift
  _lookup "$file" "$@"
  if ((${#_FOUND[@]} == 0)); then ok "no $*"; else bad "unexpected sample(s) $*: ${_FOUND[*]}"; fi
}

# readf VAR FILE: read the first line of FILE into VAR (a builtin: no fork)
readf() { IFS= read -r "$1" <"$2" || [[ -n "${!1}" ]]; }
