#!/bin/bash
# vm test: SIGHUP to a probing exporter (A, on rxe0) whose peer (B, on rxe1) probes it back.
# Unchanged config, then a changed non-prober setting: A's prober runs on untouched (active all
# along, the same QPs: no reconnect on either side, counters never go down). A changed prober
# setting: the prober restarts, its responder binds the same port again and B reconnects; the
# reload counts as a success. A prober that cannot start (its listen port taken by another
# process): the reload counts as a failure and the previous prober runs again.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"

SAMPLER=
# sample_start: scrape A and B (one curl) into $WORK/s/<n>.A and <n>.B until sample_stop; returns
# once the first pair is written, so that the samples begin before the reload
sample_start() {
  rm -rf "$WORK/s"; mkdir "$WORK/s"
  (
    i=0
    while [[ ! -e "$WORK/s/stop" ]]; do
      i=$((i + 1))
      curl -s -o "$WORK/s/$i.A" "http://127.0.0.1:$PORT_A/metrics" -o "$WORK/s/$i.B" "http://127.0.0.1:$PORT_B/metrics"
      echo "$i" >"$WORK/s/last"
      sleep 0.2
    done
  ) &
  SAMPLER=$!
  sample_wait 1
}
# sample_wait N: wait (bounded by attempts) until N more pairs are written than now
sample_wait() {
  local now=0 last=0 i
  readf now "$WORK/s/last" 2>/dev/null
  for i in $(seq 600); do
    readf last "$WORK/s/last" 2>/dev/null && ((last >= now + $1)) && return 0
    sleep 0.1
  done
  return 1
}
sample_stop() { sample_wait 1; touch "$WORK/s/stop"; wait "$SAMPLER"; SAMPLER=; }
trap '[[ -n $SAMPLER ]] && touch "$WORK/s/stop"; stop_all' EXIT  # a failed check may end the test early

# check_samples WHAT SIDES: over the samples of the given sides ("A|B" or "B"), taken from before
# the reload to after it: rdma_prober_active was always 1 and no counter went down; unless WHAT
# is "restart", every peer_up was 1, connects_total did not move (the same QPs all along) and
# probing had no gap: probes_sent_total never stood still for 10 samples in a row (each sample
# is >= 0.2 s apart, so that would be >= 2 s, 10 probe intervals without a probe).
check_samples() {
  local what=$1 sides=$2 files=() last=0 i side summary n inactive peer_down down reconnects stall
  readf last "$WORK/s/last"
  for ((i = 1; i <= last; i++)); do
    for side in A B; do [[ $side =~ ^($sides)$ && -s "$WORK/s/$i.$side" ]] && files+=("$WORK/s/$i.$side"); done
  done
  summary=$(awk '
    FNR == 1 { side = substr(FILENAME, length(FILENAME)) }
    !/^rdma_prober_(active|peer_up|probes_sent_total|rtt_seconds_count|connects_total)/ { next }
    { k = side ":" $1; v = $2 }
    $1 == "rdma_prober_active" { n[side]++ }
    $1 == "rdma_prober_active" && v != 1 { inactive++ }
    $1 ~ /^rdma_prober_peer_up/ && v != 1 { peer_down++ }
    $1 ~ /^rdma_prober_probes_sent_total/ {
      same[k] = (k in last && v == last[k]) ? same[k] + 1 : 0
      if (same[k] > stall) stall = same[k]
    }
    $1 ~ /_total|_count/ {
      if (k in last && v + 0 < last[k] + 0) down = down k ":" last[k] "->" v ";"
      if (!(k in first)) first[k] = v
      last[k] = v
    }
    END {
      min = -1
      for (s in n) if (min < 0 || n[s] < min) min = n[s]
      for (k in first) if (k ~ /connects_total/ && last[k] != first[k]) rc = rc k ":" first[k] "->" last[k] ";"
      printf "%d %d %d %s %s %d\n", min, inactive + 0, peer_down + 0, (down == "" ? "-" : down), (rc == "" ? "-" : rc), stall + 0
    }' "${files[@]}")
  read -r n inactive peer_down down reconnects stall <<<"$summary"   # (no /dev/fd in the guest: no < <(...))
  if ((n >= 2)); then ok "$what: $n scrapes of each of $sides, before to after"; else bad "$what: $n scrapes of $sides"; fi
  if ((inactive == 0)); then ok "$what: prober active in every scrape"; else bad "$what: $inactive scrapes with the prober off"; fi
  if [[ $down == - ]]; then ok "$what: no counter went down"; else bad "$what: counters went down: $down"; fi
  # A restarted prober drops its QPs: its peer's link may be down until it reconnects.
  if [[ $what == restart ]]; then return; fi
  if ((peer_down == 0)); then ok "$what: peer up in every scrape"; else bad "$what: $peer_down samples with the peer down"; fi
  if [[ $reconnects == - ]]; then ok "$what: no reconnect (same QPs)"; else bad "$what: reconnected: $reconnects"; fi
  if ((stall < 10)); then ok "$what: probing without a gap (probes_sent still for at most $stall samples in a row)"
  else bad "$what: probes_sent stood still for $stall samples in a row"; fi
}

# reload_a RESULT: SIGHUP to A, wait (bounded by attempts) until A has counted it, and check that
# it counted it as RESULT (success or failure). The expected totals are kept here.
RELOADS_OK=0 RELOADS_FAILED=0
reload_a() {
  local want=$1 i ok_n failed_n
  kill -HUP "$PID_A"
  if [[ $want == success ]]; then RELOADS_OK=$((RELOADS_OK + 1)); else RELOADS_FAILED=$((RELOADS_FAILED + 1)); fi
  for i in $(seq 300); do
    if scrape_port $PORT_A "$WORK/reload" &&
       get "$WORK/reload" rdma_exporter_config_reloads_total result=success && ok_n=$REPLY &&
       get "$WORK/reload" rdma_exporter_config_reloads_total result=failure && failed_n=$REPLY &&
       ((ok_n + failed_n >= RELOADS_OK + RELOADS_FAILED)); then
      ((ok_n == RELOADS_OK && failed_n == RELOADS_FAILED)) && return 0
      echo "  (reloads counted: $ok_n succeeded, $failed_n failed; expected $RELOADS_OK and $RELOADS_FAILED)" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "  (A never counted the reload)" >&2
  return 1
}

# The prober and one other collector (port: the non-prober setting that changes below).
start_a --collector.disable-defaults --collector.port
start_b --collector.disable-defaults --collector.port
section "both instances probe each other"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: peer b never up"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxe1 port=1 peer=a && ok "B sees a up" || bad "B: peer a never up"

# reload_untouched WHAT N LOG: SIGHUP A with its config as it is now (reload #N, whose log line
# says LOG); the prober must not notice
reload_untouched() {
  local what=$1 n=$2
  sample_start
  # the checks below assume the reload applied: without it they would take the harness limit
  reload_a success && ok "$what: reload #$n counted as a success" || { bad "$what: reload #$n not a success"; finish; }
  sleep 1  # probes go on after the reload
  sample_stop
  check_samples "$what" "A|B"
  grep -q "$3" "$WORK/exporter.log" && ok "$what: A logs '$3'" || bad "$what: no '$3' in A's log"
}

section "SIGHUP, config unchanged: the prober runs on untouched"
reload_untouched unchanged 1 "collectors kept \[port,prober\], restarted \[\]"

section "SIGHUP, a non-prober setting changed: the prober runs on untouched"
printf 'log:\n  level: info\n' >>"$WORK/a.yml"   # the file's flags still say debug: the level is not it
printf '  port:\n    verbs: false\n' >"$WORK/extra.yml"
sed -i '/^collectors:$/r '"$WORK/extra.yml" "$WORK/a.yml"
reload_untouched "non-prober change" 2 "collectors kept \[prober\], restarted \[port\]"

section "SIGHUP, a prober setting changed: the prober restarts and B reconnects"
scrape_port $PORT_B "$WORK/b_before"
b_conn=$(value "$WORK/b_before" rdma_prober_connects_total device=rxe1 port=1 peer=a)
printf '    jitter_percent: 5\n' >>"$WORK/a.yml.prober"
sed -i '/^  prober:$/r '"$WORK/a.yml.prober" "$WORK/a.yml"
sample_start
reload_a success && ok "prober change: reload counted as a success" || { bad "prober change: reload not a success"; finish; }
wait_for $PORT_A 1 rdma_prober_active && ok "A: prober active after its restart" || bad "A: prober off after its restart"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxe1 port=1 peer=a && ok "B sees a up again" || bad "B: a never came back"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up again" || bad "A: b never came back"
sample_stop
check_samples restart "B"   # B was not reloaded: its counters go on
scrape_port $PORT_B "$WORK/b_after"
b_conn2=$(value "$WORK/b_after" rdma_prober_connects_total device=rxe1 port=1 peer=a)
# B connected again: it met A's new responder, bound on the port the old one released
if num_ge "$b_conn2" "$((b_conn + 1))"; then ok "B handshook with A's new responder (connects $b_conn -> $b_conn2)"; else bad "B: connects $b_conn -> $b_conn2"; fi
grep -q "collectors kept \[port\], restarted \[prober\]" "$WORK/exporter.log" && ok "A logs the prober as restarted" || bad "no 'restarted [prober]' log"
grep -q "cannot listen" "$WORK/exporter.log" && bad "A: a responder could not bind during the reload" || ok "A: no bind failure"
scrape_port $PORT_A "$WORK/a_after"
expect_value "$WORK/a_after" 1 rdma_exporter_config_last_reload_successful
expect_value "$WORK/a_after" 0 rdma_exporter_config_reloads_total result=failure

section "SIGHUP, the prober's new listen port is taken: the reload fails, the old prober runs again"
/usr/bin/python3 -c 'import socket, time
s = socket.socket(); s.bind(("10.77.0.1", 9663)); s.listen(); time.sleep(3600)' &
HOLDER=$!
for i in $(seq 100); do (exec 3<>/dev/tcp/10.77.0.1/9663) 2>/dev/null && break; sleep 0.1; done
sed -i 's/listen_address: "10.77.0.1:9662"/listen_address: "10.77.0.1:9663"/' "$WORK/a.yml"
reload_a failure && ok "taken port: reload counted as a failure" || bad "taken port: reload not counted as a failure"
kill "$HOLDER"; wait "$HOLDER" 2>/dev/null
scrape_port $PORT_A "$WORK/a_failed"
expect_value "$WORK/a_failed" 0 rdma_exporter_config_last_reload_successful
expect_value "$WORK/a_failed" 3 rdma_exporter_config_reloads_total result=success
grep -q "configuration reload failed.*prober: cannot listen on 10.77.0.1:9663" "$WORK/exporter.log" &&
  ok "A logs why the reload failed" || bad "no reload failure log naming the port"
wait_for $PORT_A 1 rdma_prober_active && ok "A: the previous prober runs again" || bad "A: prober off after the failed reload"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxe1 port=1 peer=a && ok "B sees a up (old port 9662)" || bad "B: a down after the failed reload"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: b down after the failed reload"
cat "$WORK/exporter_b.log" >>"$WORK/exporter.log"
finish
