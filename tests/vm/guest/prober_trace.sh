#!/bin/bash
# vm test: the prober's path traces name the link, on the ECMP fabric's spine layout
# (tests/vm/lib/ecmp-fabric.sh up 2 spines: three paths x, y, z per rail, each through its own
# spine router). MODE is the routers' icmp_errors_use_inbound_ifaddr:
#   inbound (=1): every hop answers from the interface the trace came in on;
#   outbound (=0, Linux's default): from the one its route back to the tracer leaves by; the
#     spines' answers still name the path, R's may name another of its interfaces.
# Both: every flow's hop list on /prober/traces equals what the routers' own route lookups
# predict (`ecmp-fabric.sh route`); one path of rail 1 silently dropped -> rail 1's suspects are
# exactly that path's spine -> R link (the link the fresh traces stop before), none on rail 2,
# none a clean flow crosses, the time from the drop printed; healed -> no suspect within two
# windows.
# inbound: two of the three paths of a rail dropped -> both links, nothing else; a spine that
#   stops answering ICMP but forwards (new flows traced through it read `*` there) -> no suspect.
# outbound: B probes A too; the return direction (B -> A) of one path dropped: B's traces name
#   that path's spine -> L link; A, which only traces its own direction, names no link (its lossy
#   flows' fresh traces pass: their own direction carries their packets) and never one a clean
#   flow crosses.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
MODE=${1:?usage: prober_trace.sh inbound|outbound}
case $MODE in inbound) IFADDR=1 ;; outbound) IFADDR=0 ;; *) fatal "mode '$MODE' (inbound|outbound)" ;; esac
FABRIC_LAYOUT=spines
FLOWS=8
WINDOW_S=5
source "$(dirname "$0")/prober_fabric.sh"
TRACES=$(dirname "$0")/prober_traces.py
"$FABRIC" inbound-ifaddr $IFADDR || fatal "inbound-ifaddr $IFADDR"

# /prober/traces answers authenticated callers only: basic auth on both instances
AUTH=prometheus:s3cret
/usr/bin/python3 -c 'import crypt; print("basic_auth_users:\n  prometheus: \x27%s\x27" % crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' \
  >"$WORK/web.yml" 2>/dev/null || fatal "cannot write a bcrypt web config"
# 4 TTLs: L, the spine, R, and B (which answers nothing: rxe holds UDP 4791 there)
COMMON+=(--web.config.file="$WORK/web.yml" --collector.prober.trace-max-hops=4 --collector.prober.trace-timeout=300ms)
scrape_port() { curl -sf -u "$AUTH" -o "$2" "http://127.0.0.1:$1/metrics"; }
if [[ $MODE == outbound ]]; then
  # B probes A too, by A's rail-2 address (both rails pair by the rail rules)
  printf 'collectors:\n  prober:\n    listen_address: ":9663"\n    rails: %s\n    peers:\n      - {address: 10.2.1.2, name: a, tcp_port: 9662}\n' \
    "$RAILS" >"$WORK/b.yml"
fi

# traces PORT FILE: the instance's flows once all 2 x FLOWS have a path (prober_traces.py's lines,
# with each flow's state in the answer's window), and that same answer's suspects in FILE.suspects
traces() { /usr/bin/python3 "$TRACES" "http://127.0.0.1:$1/prober/traces" "$AUTH" $((2 * FLOWS)) "$2.suspects" >"$2"; }

# suspects FILE RAIL: the rail's suspect links "from>to=lossy_flows", sorted on one line (REPLY)
suspects() {
  local line from to out=()
  while read -r line; do
    [[ $line == rdma_prober_suspect_link\{* && $line == *"rail=\"$2\""* ]] || continue
    [[ $line =~ from=\"([^\"]*)\" ]] && from=${BASH_REMATCH[1]}
    [[ $line =~ to=\"([^\"]*)\" ]] && to=${BASH_REMATCH[1]}
    out+=("$from>$to=${line##* }")
  done <"$1"
  REPLY=$(printf '%s\n' "${out[@]}" | sort | tr '\n' ' ')
  REPLY=${REPLY% }
}
# links_of "a>b=N c>d=M": "a>b c>d"
links_of() { local s=" $1"; s=$(sed 's/=[0-9.e+]*//g' <<<"$s"); REPLY=${s# }; }

# wait_suspects PORT RAIL WANT [OTHER_RAIL]: poll (bounded) until RAIL's suspect links (as
# links_of prints them, sorted) are exactly WANT and OTHER_RAIL has none; the scrape stays in $WORK/poll
wait_suspects() {
  local i got= other=
  for i in $(seq 600); do
    if scrape_port "$1" "$WORK/poll"; then
      suspects "$WORK/poll" "$2"; links_of "$REPLY"; got=$REPLY
      other=
      [[ -n ${4-} ]] && { suspects "$WORK/poll" "$4"; other=$REPLY; }
      [[ $got == "$3" && -z $other ]] && return 0
    fi
    sleep 0.1
  done
  echo "  (suspects on $2: '$got'${4+, on $4: '$other'}; waited for '$3')" >&2
  return 1
}

# no_suspects_within_two_windows PORT: poll until no suspect on any rail; false when that took
# more than two localization windows (or never came)
no_suspects_within_two_windows() {
  local i w0
  scrape_port "$1" "$WORK/poll" && windows "$WORK/poll" || return 1
  w0=$REPLY
  for i in $(seq 600); do
    if scrape_port "$1" "$WORK/poll" && ! grep -q '^rdma_prober_suspect_link{' "$WORK/poll"; then
      windows "$WORK/poll"
      echo "  no suspect $((REPLY - w0)) window(s) after the heal"
      ((REPLY - w0 <= 2))
      return
    fi
    sleep 0.1
  done
  return 1
}

# clean_crossing FILE RAIL: the suspects of RAIL in one /prober/traces answer (FILE.suspects) that a
# flow of the rail judged clean in that answer's window (FILE) crosses, on one line ("" = none).
# Both from one answer: the suspects and the flow states they were named from are one window's.
clean_crossing() {
  local rail dev flow sport path fresh state out= l links=()
  while read -r rail l; do [[ $rail == "$2" ]] && links+=("$l"); done < <(tail -n +2 "$1.suspects")
  [[ -e /dev/fd/0 ]] || { echo "clean_crossing: no /dev/fd: the suspects cannot be read" >&2; echo "?"; return; }
  while read -r rail dev flow sport path fresh state; do
    [[ $rail == "$2" && $state == clean && $path != - ]] || continue
    for l in "${links[@]}"; do
      [[ ",$path," == *",${l%>*},${l#*>},"* ]] && out+=" $l($dev#$flow)"
    done
  done <"$1"
  echo "${out# }"
}
# answer_suspects FILE RAIL: the rail's suspects in that answer, sorted on one line (REPLY)
answer_suspects() { REPLY=$(awk -v r="$2" 'NR > 1 && $1 == r {print $2}' "$1.suspects" | sort | tr '\n' ' '); REPLY=${REPLY% }; }

# fault_at_window ARGS...: `ecmp-fabric.sh ARGS` as a localization window begins (so that window
# holds the fault from its start); T0 = when
fault_at_window() {
  next_window || fatal "no localization window closes"
  T0=$(date +%s.%N)
  "$FABRIC" "$@" || fatal "ecmp-fabric.sh $*"
}
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# Paths of the flows: P_<side><rail>[path]=count, the predicted hop lists in $WORK/route_<side><rail>
declare -A FLOWS_ON
# check_routes SIDE PORT: every flow's traced path on SIDE (a or b) = the routers' prediction
check_routes() {
  local side=$1 port=$2 r rail dev flow sport path fresh want sp h1 h2 h3 _ p n=0 bad_n=0 src
  traces $port "$WORK/t_$side" || bad "$side: not every flow traced: $(cat "$WORK/t_$side")"
  for r in 1 2; do
    FLOWS_ON[$side$r:x]=0 FLOWS_ON[$side$r:y]=0 FLOWS_ON[$side$r:z]=0
    mapfile -t sps <<<"$(awk -v r="rail$r" '$1 == r {print $4}' "$WORK/t_$side")"
    "$FABRIC" route $r $side "${sps[@]}" >"$WORK/route_$side$r" || bad "route $r $side failed"
    [[ $side == a ]] && src=10.$r.1.2 || src=10.$r.2.2
    while read -r sp h1 h2 h3 _ p; do
      want="$src,$h1,$h2,$h3"
      path=$(awk -v r="rail$r" -v s="$sp" '$1 == r && $4 == s {print $5}' "$WORK/t_$side")
      n=$((n + 1))
      if [[ $path == "$want" ]]; then FLOWS_ON[$side$r:$p]=$((FLOWS_ON[$side$r:$p] + 1)); else
        bad_n=$((bad_n + 1)); echo "  $side rail $r sport $sp: traced '$path', the routers say '$want' (path $p)"; fi
    done <"$WORK/route_$side$r"
  done
  ((n == 2 * FLOWS && bad_n == 0)) && ok "$side: all $n flows' hop lists = the routers' route lookups" \
    || bad "$side: $bad_n of $n flows' hop lists differ from the routers' route lookups"
  echo "  $side: rail 1 x/y/z ${FLOWS_ON[${side}1:x]}/${FLOWS_ON[${side}1:y]}/${FLOWS_ON[${side}1:z]}," \
       "rail 2 ${FLOWS_ON[${side}2:x]}/${FLOWS_ON[${side}2:y]}/${FLOWS_ON[${side}2:z]}"
}
# spine_addr RAIL PATH l|r: the spine's address towards L (sl) or R (sr)
spine_addr() { local i; case $2 in x) i=1 ;; y) i=2 ;; z) i=3 ;; esac; [[ $3 == l ]] && echo 10.$((100 + $1)).$i.2 || echo 10.$((100 + $1)).$((10 + i)).1; }
# expected_links SIDE RAIL PATH...: "spine>last" for the flows of SIDE on those paths (route_*),
# the links right after the spine (where their fresh traces stop), sorted on one line
expected_links() {
  local side=$1 r=$2; shift 2
  local p sp h1 h2 h3 _ pp out=()
  for p in "$@"; do
    while read -r sp h1 h2 h3 _ pp; do [[ $pp == "$p" ]] && out+=("$h2>$h3"); done <"$WORK/route_$side$r"
  done
  REPLY=$(printf '%s\n' "${out[@]}" | sort -u | tr '\n' ' '); REPLY=${REPLY% }
}
# busiest SIDE RAIL: the path of the rail with most of SIDE's flows, when another path has some
busiest() {
  local p best= n=0 total=0
  for p in x y z; do
    total=$((total + FLOWS_ON[$1$2:$p]))
    ((FLOWS_ON[$1$2:$p] > n)) && n=${FLOWS_ON[$1$2:$p]} best=$p
  done
  ((n > 0 && n < total)) && REPLY=$best
}

start_fabric_pair
[[ $MODE == outbound ]] && { wait_for $PORT_B 1 rdma_prober_peer_up device=rxeB1 port=1 peer=a || fatal "B: rail 1 not up"; }
section "the traces: hop lists from the routers' own route lookups (icmp_errors_use_inbound_ifaddr=$IFADDR) [${SECONDS} s]"
check_routes a $PORT_A
wait_verdict "rail1:none rail2:none" && ok "verdict none on both rails before any fault" || bad "verdict not none at the start"
scrape_port $PORT_A "$WORK/m0"
get "$WORK/m0" rdma_prober_tracer_state state=available && ((REPLY == 1)) && ok "A's tracer available" || bad "A's tracer state: $(series "$WORK/m0" rdma_prober_tracer_state)"
! grep -q '^rdma_prober_suspect_link{' "$WORK/m0" && ok "no suspect link" || bad "suspects before any fault: $(grep '^rdma_prober_suspect_link{' "$WORK/m0")"

section "one path of rail 1 silently dropped: its spine -> R link named, nothing else [${SECONDS} s]"
busiest a 1 || fatal "rail 1's flows are all on one path: nothing clean to tell it apart"
P=$REPLY
expected_links a 1 $P; want=$REPLY
echo "  dropping path $P of rail 1 (${FLOWS_ON[a1:$P]} of A's $FLOWS flows); expected: $want"
fault_at_window drop 1 $P
if wait_suspects $PORT_A rail1 "$want" rail2; then
  t1=$(date +%s.%N)
  ok "rail 1's suspects: $want (path $P's spine -> R), none on rail 2"
  echo "  time from the drop to the named link: $(elapsed "$T0" "$t1") s (window ${WINDOW_S} s, interval 200 ms, the drop at a window's start)"
else
  bad "rail 1's suspects are not $want"
fi
# Each lossy flow joins the intersection once its fresh trace is back: poll (bounded) until the
# suspects explain every flow on P
for i in $(seq 300); do
  suspects "$WORK/poll" rail1; s=$REPLY
  total=0; for x in $s; do total=$((total + ${x##*=})); done
  ((total == FLOWS_ON[a1:$P])) && break
  sleep 0.1; scrape_port $PORT_A "$WORK/poll"
done
((total == FLOWS_ON[a1:$P])) && ok "the suspects explain $total lossy flows = the ${FLOWS_ON[a1:$P]} on $P" \
  || bad "the suspects ($s) explain $total lossy flows, ${FLOWS_ON[a1:$P]} on $P"
traces $PORT_A "$WORK/t_drop"
answer_suspects "$WORK/t_drop" rail1
[[ -n $REPLY ]] && ok "/prober/traces names rail 1's suspects with the flows' states: $REPLY ($(head -1 "$WORK/t_drop.suspects"))" \
  || bad "/prober/traces names no suspect on rail 1 while /metrics does"
c=$(clean_crossing "$WORK/t_drop" rail1)
[[ -z $c ]] && ok "no flow judged clean in that window crosses a suspect" || bad "clean flows cross suspects: $c"
wait_verdict "rail1:path rail2:none" && ok "verdict path on rail 1, none on rail 2" || bad "verdicts with $P dropped"

section "healed: no suspect within two windows [${SECONDS} s]"
"$FABRIC" heal 1 $P || fatal "heal 1 $P"
no_suspects_within_two_windows $PORT_A && ok "no suspect within two windows of the heal" || bad "suspects stay after the heal: $(grep '^rdma_prober_suspect_link{' "$WORK/poll")"
wait_verdict "rail1:none rail2:none" && ok "verdict none again" || bad "verdict not none after the heal"

if [[ $MODE == inbound ]]; then
  section "two of the three paths dropped: both links [${SECONDS} s]"
  R2= keep=
  for r in 1 2; do
    if ((FLOWS_ON[a$r:x] > 0 && FLOWS_ON[a$r:y] > 0 && FLOWS_ON[a$r:z] > 0)); then R2=$r; break; fi
  done
  [[ -n $R2 ]] || fatal "no rail has A's flows on all three paths"
  # keep the busiest path clean
  busiest a $R2; keep=$REPLY
  drops=(); for p in x y z; do [[ $p != "$keep" ]] && drops+=($p); done
  expected_links a $R2 "${drops[@]}"; want=$REPLY
  other=$((3 - R2))
  echo "  dropping paths ${drops[*]} of rail $R2, $keep clean; expected: $want"
  fault_at_window drop $R2 ${drops[0]}
  "$FABRIC" drop $R2 ${drops[1]} || fatal "drop $R2 ${drops[1]}"
  if wait_suspects $PORT_A rail$R2 "$want" rail$other; then
    ok "rail $R2's suspects: $want, none on rail $other ($(elapsed "$T0" "$(date +%s.%N)") s after the drop)"
  else
    bad "rail $R2's suspects are not $want"
  fi
  traces $PORT_A "$WORK/t_drop2"
  c=$(clean_crossing "$WORK/t_drop2" rail$R2)
  [[ -z $c ]] && ok "no flow judged clean in that window crosses a suspect" || bad "clean flows cross suspects: $c"
  for p in "${drops[@]}"; do "$FABRIC" heal $R2 $p || fatal "heal $R2 $p"; done
  no_suspects_within_two_windows $PORT_A && ok "healed: no suspect within two windows" || bad "suspects stay after the heal"

  section "a spine that stops answering ICMP but forwards: new traces read * there, no suspect [${SECONDS} s]"
  busiest a 1; S=$REPLY
  # silent on both rails: a new A's flows may take other source ports, and 16 flows all missing
  # one path happen 1 time in 650
  for r in 1 2; do "$FABRIC" silent $r $S || fatal "silent $r $S"; done
  # a new A: its flows are traced when created, through the silent spines
  restart_a
  traces $PORT_A "$WORK/t_silent" || bad "A: not every flow traced with spine $S silent"
  n=0 m=0 o=0
  for r in 1 2; do
    mapfile -t sps <<<"$(awk -v r="rail$r" '$1 == r {print $4}' "$WORK/t_silent")"
    "$FABRIC" route $r a "${sps[@]}" >"$WORK/route_silent$r" || bad "route $r a failed"
    while read -r sp h1 h2 h3 _ p; do
      got=$(awk -v r="rail$r" -v s="$sp" '$1 == r && $4 == s {print $5}' "$WORK/t_silent")
      if [[ $p == "$S" ]]; then
        n=$((n + 1))
        [[ $got == "10.$r.1.2,$h1,*,$h3" ]] && m=$((m + 1)) || echo "  rail $r sport $sp: '$got', expected 10.$r.1.2,$h1,*,$h3"
      elif [[ $got != "10.$r.1.2,$h1,$h2,$h3" ]]; then
        o=$((o + 1)); echo "  rail $r sport $sp: '$got', expected 10.$r.1.2,$h1,$h2,$h3"
      fi
    done <"$WORK/route_silent$r"
  done
  ((n > 0 && m == n && o == 0)) && ok "the $n flows through spine $S: its hop is *, L and R still answer; the others' hop lists complete" \
    || bad "$m of $n flows through $S read * at the spine, $o others differ"
  next_window && next_window || fatal "no localization windows close"
  ! grep -q '^rdma_prober_suspect_link{' "$WORK/poll" && ok "no suspect over two windows" || bad "suspects with a silent spine: $(grep '^rdma_prober_suspect_link{' "$WORK/poll")"
  wait_verdict "rail1:none rail2:none" && ok "verdict none: the silent spine forwards" || bad "verdict not none with spine $S silent"
  for r in 1 2; do "$FABRIC" unsilent $r $S || fatal "unsilent $r $S"; done
else
  section "the return direction of one path dropped (B -> A only): B names it, A at most the path [${SECONDS} s]"
  check_routes b $PORT_B
  busiest b 1 || fatal "B's rail-1 flows are all on one path"
  P=$REPLY
  # B's traces run R -> spine -> L: the spine's sr address, then L's answer
  expected_links b 1 $P; want=$REPLY
  echo "  dropping B -> A over path $P of rail 1 (${FLOWS_ON[b1:$P]} of B's flows); expected at B: $want"
  fault_at_window drop-return 1 $P
  if wait_suspects $PORT_B rail1 "$want" rail2; then
    ok "B's rail-1 suspects: $want (path $P's spine -> L), none on rail 2 ($(elapsed "$T0" "$(date +%s.%N)") s after the drop)"
  else
    bad "B's rail-1 suspects are not $want"
  fi
  traces $PORT_B "$WORK/t_ret_b"
  c=$(clean_crossing "$WORK/t_ret_b" rail1)
  [[ -z $c ]] && ok "B: no clean flow crosses a suspect" || bad "B: clean flows cross suspects: $c"
  # A: its flows whose answers come back over P lose; its traces go A -> B and pass
  scrape_port $PORT_A "$WORK/ret_a"
  suspects "$WORK/ret_a" rail1; sa=$REPLY
  echo "  A sees: verdicts '$(verdicts "$WORK/ret_a")', rail-1 suspects '${sa:-none}'"
  traces $PORT_A "$WORK/t_ret_a"
  c=$(clean_crossing "$WORK/t_ret_a" rail1)
  [[ -z $c ]] && ok "A: no suspect that a clean flow crosses" \
    || bad "A: clean flows cross suspects: $c"
  a_fresh_cut=$(awk '$1 == "rail1" && $6 != "-" && split($6, h, ",") < 4' "$WORK/t_ret_a" | wc -l)
  ((a_fresh_cut == 0)) && ok "A's fresh traces all pass the spine (nothing stops them: the drop is on the way back)" \
    || bad "$a_fresh_cut of A's fresh traces stop early with only the return direction dropped"
  # A lossy flow whose fresh trace passed supports no link (suspect_links.h): with every lossy
  # flow's fresh trace back and passing, A names nothing -- never a forward link. A lossy flow whose
  # fresh trace found no hop at all keeps its path in question (the check above then stands alone).
  a_unseen=$(awk '$1 == "rail1" && $7 == "lossy" && $6 == "-"' "$WORK/t_ret_a" | wc -l)
  answer_suspects "$WORK/t_ret_a" rail1
  if ((a_unseen == 0)); then
    [[ -z $REPLY ]] && ok "A names no link: its lossy flows' fresh traces passed" || bad "A names forward links: $REPLY"
  else
    echo "  A: $a_unseen lossy flows without a fresh trace in that answer; its suspects: '${REPLY:-none}'"
  fi
  "$FABRIC" heal-return 1 $P || fatal "heal-return 1 $P"
  no_suspects_within_two_windows $PORT_B && ok "B: healed, no suspect within two windows" || bad "B: suspects stay after the heal"
  no_suspects_within_two_windows $PORT_A && ok "A: no suspect within two windows" || bad "A: suspects stay after the heal"
fi
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
