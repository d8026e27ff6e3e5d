#!/usr/bin/env bash
# netns test of the prober's path tracer (collectors/prober/wire/path_tracer.h) with the real
# sockets, in a routed fabric of network namespaces this script creates (and always removes):
#
#   S (10.0.1.2) --veth-- L ==3 parallel links, ECMP, fib_multipath_hash_policy=1== R --veth-- D (10.0.9.2)
#
# L and R forward; R answers ICMP from the interface the packet came in on
# (icmp_errors_use_inbound_ifaddr=1), so its hop names the parallel link the flow took. The
# routers' ICMP rate limit is off (icmp_ratelimit=0): the test checks the tracer's own bound, not
# the kernel's (a Linux router answers one error per second per destination after a burst of 6).
# D has nothing on UDP 4791, so it answers port unreachable: the trace is complete there.
#   * for many source ports: each hop list is [10.0.1.1, R's address on the link that
#     `ip -n L route get 10.0.9.2 from 10.0.1.2 iif l0 ipproto udp sport S dport 4791` names,
#     10.0.9.2], and all three links are seen;
#   * the packets counted at L (raw PREROUTING, udp dport 4791 in from S) never exceed the token
#     bucket's bound (burst + rate x elapsed);
#   * R's locally generated ICMP blackholed (`ip rule ... iif lo ipproto icmp blackhole`): its
#     hop is `*`, L and D are still read;
#   * IPv6 on the same fabric: complete traces through ICMPv6, R named by the link the flow took
#     (Linux answers ICMPv6 from the ingress link here), the same path for a port traced twice
#     (not compared with `ip -6 route get`: on this kernel its answer for a forwarded UDP flow
#     differs from the path the packets take, even with the same hash fields);
#   * a source port already bound by another socket: port_in_use, the other socket untouched;
#   * D silent on 4791 (a RoCE NIC): at the defaults, over 4 local ports, traces of different links
#     overlap (at least 4 in flight), L counts no more than the 4 buckets allow, and exactly 2
#     packets per trace reach D; prints the traces per second;
#   * D forges answers to every trace packet it gets (icmp_forger.py: bare IP + UDP quotes, a port
#     unreachable from D's address, another QP, a TTL never sent): each counted by reason, no hop,
#     no destination, the traces stay L, R (partial);
#   * the path grows by a router X between L and R: the traces read L, X, R, D (and L, X, R with
#     D silent), nothing of the old path kept.
# Prints the packets per trace and the time of one trace (the figures docs/prober.md quotes).
# Usage: netns_tracer.sh --driver PATH   (root; without root or a tool it fails)
set -uo pipefail

DRIVER=
while [[ $# -gt 0 ]]; do
  case $1 in
    --driver) DRIVER=$2; shift 2 ;;
    *) echo "usage: $0 --driver PATH"; exit 2 ;;
  esac
done
[[ -x "$DRIVER" ]] || { echo "FATAL: driver $DRIVER is not executable"; exit 2; }
if [[ $(id -u) -ne 0 ]]; then echo "FATAL: the netns test needs root (ip netns add, veth)"; exit 1; fi
for tool in ip iptables python3; do
  command -v $tool >/dev/null || { echo "FATAL: $tool is not installed (scripts/install-deps.sh)"; exit 1; }
done

P=rtr$$
S=${P}s L=${P}l R=${P}r D=${P}d
WORK=$(mktemp -d /tmp/netns-tracer.XXXXXX)
HOLDER=
FORGER=
cleanup() {
  [[ -n "$HOLDER" ]] && kill "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null
  [[ -n "$FORGER" ]] && kill "$FORGER" 2>/dev/null && wait "$FORGER" 2>/dev/null
  for ns in $S $L $R $D ${P}x; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$WORK"
}
trap cleanup EXIT
FAIL=0
fail() { echo "FAIL: $*"; FAIL=1; }

for ns in $S $L $R $D; do
  ip netns add "$ns" 2>"$WORK/err" || { echo "FATAL: cannot create a network namespace: $(cat "$WORK/err")"; exit 1; }
  ip -n "$ns" link set lo up
done
veth() {  # ns1 dev1 addr1 ns2 dev2 addr2
  ip link add "$2" netns "$1" type veth peer name "$5" netns "$4" || exit 1
  ip -n "$1" addr add "$3" dev "$2" && ip -n "$1" link set "$2" up
  ip -n "$4" addr add "$6" dev "$5" && ip -n "$4" link set "$5" up
}
veth $S s0 10.0.1.2/24 $L l0 10.0.1.1/24
veth $L la 10.0.10.1/24 $R ra 10.0.10.2/24
veth $L lb 10.0.11.1/24 $R rb 10.0.11.2/24
veth $L lc 10.0.12.1/24 $R rc 10.0.12.2/24
veth $R r9 10.0.9.1/24 $D d0 10.0.9.2/24
ip -n $S route add default via 10.0.1.1
ip -n $D route add default via 10.0.9.1
# IPv6 on the same links (nodad: usable at once): S fd00:1::2, L fd00:1::1, D fd00:9::2.
v6() { ip -n "$1" addr add "$3" dev "$2" nodad; }
v6 $S s0 fd00:1::2/64; v6 $L l0 fd00:1::1/64
v6 $L la fd00:10::1/64; v6 $R ra fd00:10::2/64
v6 $L lb fd00:11::1/64; v6 $R rb fd00:11::2/64
v6 $L lc fd00:12::1/64; v6 $R rc fd00:12::2/64
v6 $R r9 fd00:9::1/64; v6 $D d0 fd00:9::2/64
ip -n $S -6 route add default via fd00:1::1
ip -n $D -6 route add default via fd00:9::1
ip -n $L -6 route add fd00:9::/64 nexthop via fd00:10::2 dev la nexthop via fd00:11::2 dev lb nexthop via fd00:12::2 dev lc
ip -n $R -6 route add fd00:1::/64 via fd00:10::1 dev ra
for ns in $L $R; do
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.icmp_ratelimit=0 net.ipv4.conf.all.rp_filter=0 \
    net.ipv4.conf.default.rp_filter=0
done
ip netns exec $D sysctl -qw net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0
for ns in $L $R; do ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.forwarding=1 net.ipv6.icmp.ratelimit=0; done
ip netns exec $L sysctl -qw net.ipv4.fib_multipath_hash_policy=3 net.ipv4.fib_multipath_hash_fields=0x0037 \
  net.ipv6.fib_multipath_hash_policy=3 net.ipv6.fib_multipath_hash_fields=0x0037
ip netns exec $R sysctl -qw net.ipv4.icmp_errors_use_inbound_ifaddr=1
ip -n $L route add 10.0.9.0/24 nexthop via 10.0.10.2 dev la nexthop via 10.0.11.2 dev lb nexthop via 10.0.12.2 dev lc
ip -n $R route add 10.0.1.0/24 via 10.0.10.1 dev ra
# The trace packets that reach the first router from S, TTL-expired or not.
ip netns exec $L iptables -t raw -A PREROUTING -i l0 -p udp --dport 4791 || { echo "FATAL: iptables raw table"; exit 1; }
l_packets() { ip netns exec $L iptables -t raw -L PREROUTING -vnx | awk '$0 ~ /dpt:4791/ {print $1; exit}'; }
ip -n $S route get 10.0.9.2 >/dev/null && ip -n $L route get 10.0.9.2 >/dev/null && ip -n $R route get 10.0.1.2 >/dev/null ||
  { echo "FATAL: the fabric does not route"; exit 1; }

RATE=10 BURST=10 N=48 FIRST=49152
echo "== $N traces, ports $FIRST.., rate $RATE/s burst $BURST"
before=$(l_packets)
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports $FIRST:$N --tos 106 --qpn 0x123 \
  --rate $RATE --burst $BURST --max-hops 8 --timeout-ms 250 >"$WORK/traces" || fail "driver exit $?"
after=$(l_packets)
cat "$WORK/traces" | head -5
tail -1 "$WORK/traces"
declare -A seen
mismatch=0
while read -r line; do
  [[ $line == sport=* ]] || continue
  sport=$(sed -E 's/^sport=([0-9]+).*/\1/' <<<"$line")
  hops=$(sed -E 's/.* hops=//' <<<"$line")
  result=$(sed -E 's/.* result=([a-z_]+).*/\1/' <<<"$line")
  via=$(ip -n $L route get 10.0.9.2 from 10.0.1.2 iif l0 ipproto udp sport "$sport" dport 4791 | sed -nE 's/.* via ([0-9.]+) .*/\1/p')
  want="10.0.1.1,$via,10.0.9.2"
  if [[ $result != complete || $hops != "$want" ]]; then
    fail "sport $sport: result $result hops $hops, the routers' lookup says $want"
    mismatch=$((mismatch + 1))
  fi
  seen[$via]=1
done <"$WORK/traces"
[[ $(grep -c '^sport=' "$WORK/traces") -eq $N ]] || fail "not $N traces"
[[ ${#seen[@]} -eq 3 ]] || fail "the traces crossed ${#seen[@]} of the 3 parallel links (${!seen[*]})"
echo "hop lists equal to the routers' route lookups: $((N - mismatch)) of $N; parallel links seen: ${!seen[*]}"
grep -q 'binding=bindtodevice\|binding=unicast_if' "$WORK/traces" || fail "the socket was not tied to s0"

read -r total_packets elapsed < <(awk '/^total/ {for (i = 1; i <= NF; ++i) {split($i, kv, "="); v[kv[1]] = kv[2]} print v["packets"], v["seconds"]}' "$WORK/traces")
at_l=$((after - before))
bound=$(python3 -c "print(int($BURST + $RATE * $elapsed))")
echo "packets sent $total_packets, counted at L $at_l, bucket bound $bound over ${elapsed}s"
[[ $at_l -eq $total_packets ]] || fail "L counted $at_l trace packets, the driver sent $total_packets"
[[ $at_l -le $bound ]] || fail "L saw $at_l packets, more than the bucket's $bound"
python3 - "$WORK/traces" <<'EOF'
import sys
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1]) if l.startswith("sport=")]
secs = sorted(float(r["seconds"]) for r in rows)
pk = sum(int(r["packets"]) for r in rows) / len(rows)
print(f"packets per trace {pk:.2f}; one trace: median {secs[len(secs)//2]*1000:.1f} ms, max {secs[-1]*1000:.1f} ms "
      "(paced: up to 8 traces wait on the one bucket at once)")
EOF

echo "== R's own ICMP blackholed: its hop is *, L and D still answer"
ip -n $R rule add pref 10 iif lo ipproto icmp blackhole || { echo "FATAL: ip rule ipproto"; exit 1; }
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 50000:4 --rate 100 --burst 10 \
  --timeout-ms 200 >"$WORK/silent" || fail "driver exit $?"
cat "$WORK/silent"
[[ $(grep -c 'result=complete .*hops=10.0.1.1,\*,10.0.9.2$' "$WORK/silent") -eq 4 ]] || fail "a silent R is not read as *"
ip -n $R rule del pref 10

echo "== IPv6 (IPV6_RECVERR, ICMPv6): complete, L and D named, R by one of its link addresses, each port twice alike"
ip netns exec $S "$DRIVER" --source fd00:1::2 --dest fd00:9::2 --dev s0 --sports 51000:12 --rate 100 --burst 40 \
  >"$WORK/v6" || fail "driver exit $?"
ip netns exec $S "$DRIVER" --source fd00:1::2 --dest fd00:9::2 --dev s0 --sports 51000:12 --rate 100 --burst 40 \
  >"$WORK/v6b" || fail "driver exit $?"
head -3 "$WORK/v6"
[[ $(grep -cE ' result=complete .*hops=fd00:1::1,fd00:1[012]::2,fd00:9::2$' "$WORK/v6") -eq 12 ]] || fail "IPv6 traces"
diff <(grep -o '^sport=[0-9]* .* hops=.*' "$WORK/v6" | sed -E 's/ packets.* hops=/ /' | sort) \
     <(grep -o '^sport=[0-9]* .* hops=.*' "$WORK/v6b" | sed -E 's/ packets.* hops=/ /' | sort) || fail "IPv6: a port took another path"

echo "== a source port held by another socket: port_in_use"
ip netns exec $S python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("10.0.1.2", 50100)); print("bound", flush=True); time.sleep(60)' \
  >"$WORK/holder" 2>&1 &
HOLDER=$!
for _ in $(seq 50); do grep -q bound "$WORK/holder" && break; sleep 0.1; done
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 50099:3 >"$WORK/inuse" || fail "driver exit $?"
cat "$WORK/inuse"
grep -q '^sport=50100 result=port_in_use packets=0' "$WORK/inuse" || fail "a taken port is not port_in_use"
[[ $(grep -c 'result=complete' "$WORK/inuse") -eq 2 ]] || fail "the ports around it were not traced"
kill -0 "$HOLDER" 2>/dev/null || fail "the socket holding the port died"

kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null; HOLDER=

# D silent on UDP 4791 from here on (as a RoCE NIC: it drops the trace packet, answers nothing),
# and every trace packet that reaches D counted (raw PREROUTING: before that drop).
ip netns exec $D iptables -A INPUT -p udp --dport 4791 -j DROP || { echo "FATAL: iptables in D"; exit 1; }
ip netns exec $D iptables -t raw -A PREROUTING -i d0 -p udp --dport 4791 || { echo "FATAL: iptables raw in D"; exit 1; }
d_packets() { ip netns exec $D iptables -t raw -L PREROUTING -vnx | awk '$0 ~ /dpt:4791/ {print $1; exit}'; }
field() { awk -v k="$1" '/^total/ {for (i = 1; i <= NF; ++i) {split($i, kv, "="); if (kv[1] == k) print kv[2]}}' "$2"; }

echo "== concurrency at the defaults (rate 10/s, burst 10, 250 ms, 8 hops, one trace per port, starts 6 then 1/s), D silent"
# 4 local ports of this node (4 buckets), 12 links each; every trace: L, R answer, 2 silent TTLs.
LOCALS=4 N=48
before=$(l_packets) d_before=$(d_packets)
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 53000:$N --qpn 0x123 \
  --locals $LOCALS >"$WORK/concurrent" || fail "driver exit $?"
at_l=$(( $(l_packets) - before )) at_d=$(( $(d_packets) - d_before ))
tail -1 "$WORK/concurrent"
elapsed=$(field seconds "$WORK/concurrent") packets=$(field packets "$WORK/concurrent")
in_flight=$(field max_in_flight "$WORK/concurrent")
[[ $(grep -cE ' result=partial .*hops=10\.0\.1\.1,10\.0\.1[012]\.2$' "$WORK/concurrent") -eq $N ]] ||
  fail "not $N partial traces L,R with D silent"
bound=$(python3 -c "print(int($LOCALS * (10 + 10 * $elapsed)))")
python3 -c "print(f'traces per second per node ($LOCALS ports): {$N / $elapsed:.2f}; per port: {$N / $elapsed / $LOCALS:.2f}')"
echo "packets sent $packets, at L $at_l (bound of $LOCALS buckets $bound), reaching D (its NIC) $at_d; most traces at once $in_flight"
[[ $at_l -eq $packets ]] || fail "L counted $at_l trace packets, the driver sent $packets"
[[ $at_l -le $bound ]] || fail "L saw $at_l packets, more than the $LOCALS buckets' $bound"
[[ $at_d -eq $((2 * N)) ]] || fail "D's NIC got $at_d trace packets, not 2 per trace ($((2 * N)))"
[[ $in_flight -ge $LOCALS ]] || fail "at most $in_flight traces at once: the traces of different ports did not overlap"
# Each port's trace starts within what a Linux router answers one address (burst 6, then 1/s; the
# driver gives port i % LOCALS to the i-th source port), and its traces one at a time.
python3 - "$WORK/concurrent" $LOCALS 53000 <<'PY' || fail "a port started more traces than 6 + 1/s, or overlapped its own"
import re, sys
path, locals_, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ports = {}
for line in open(path):
    m = re.match(r"sport=(\d+) .*seconds=([\d.]+) start=([\d.]+)", line)
    if m:
        ports.setdefault((int(m[1]) - first) % locals_, []).append((float(m[3]), float(m[2])))
ok = True
for port, spans in sorted(ports.items()):
    spans.sort()
    starts = [s for s, _ in spans]
    worst = max(j - i + 1 - (starts[j] - starts[i]) for i in range(len(starts)) for j in range(i, len(starts)))
    overlap = any(spans[k + 1][0] < spans[k][0] + spans[k][1] - 1e-3 for k in range(len(spans) - 1))
    print(f"port {port}: {len(starts)} traces, starts beyond 1/s at most {worst:.2f} (bound 6), own traces overlapping: {overlap}")
    ok = ok and worst <= 6 + 0.05 and not overlap
sys.exit(0 if ok else 1)
PY

echo "== forged answers from D (bare quotes, the destination's address, another QP, a TTL not sent): counted, ignored"
ip -n $D addr add 10.0.9.7/24 dev d0
: >"$WORK/forger"
ip netns exec $D python3 "$(dirname "$0")/icmp_forger.py" d0 10.0.9.7 10.0.9.2 >"$WORK/forger" 2>&1 &
FORGER=$!
for _ in $(seq 50); do grep -q ready "$WORK/forger" && break; sleep 0.1; done
grep -q ready "$WORK/forger" || fail "the forger did not start: $(cat "$WORK/forger")"
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 54000:6 --qpn 0x123 --rate 100 \
  --burst 40 >"$WORK/forged" || fail "driver exit $?"
kill "$FORGER" 2>/dev/null; wait "$FORGER" 2>/dev/null
cat "$WORK/forged"
echo "forger: $(tail -1 "$WORK/forger")"
grep -q '^forged' "$WORK/forger" || fail "the forger answered nothing"
while read -r line; do
  [[ $line == sport=* ]] || continue
  [[ $line =~ \ result=partial\ .*hops=10\.0\.1\.1,10\.0\.1[012]\.2$ ]] || fail "forged answers made a hop or a distance: $line"
  for reason in short_quote wrong_qpn wrong_psn; do
    [[ $line =~ ignored=.*$reason: ]] || fail "no $reason counted: $line"
  done
done <"$WORK/forged"
[[ $(grep -c '^sport=' "$WORK/forged") -eq 6 ]] || fail "not 6 traces under forgery"

echo "== the path grows by one hop (X between L and R): the new hop is seen, nothing of the old path carried"
ip netns add ${P}x || exit 1
ip -n ${P}x link set lo up
veth $L lx 10.0.20.1/24 ${P}x xl 10.0.20.2/24
veth ${P}x xr 10.0.21.1/24 $R rx 10.0.21.2/24
ip -n ${P}x route add 10.0.9.0/24 via 10.0.21.2
ip -n ${P}x route add 10.0.1.0/24 via 10.0.20.1
ip netns exec ${P}x sysctl -qw net.ipv4.ip_forward=1 net.ipv4.icmp_ratelimit=0 net.ipv4.conf.all.rp_filter=0
ip netns exec $D iptables -D INPUT -p udp --dport 4791 -j DROP  # D answers again: complete traces
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 55000:4 --rate 100 --burst 40 \
  >"$WORK/before" || fail "driver exit $?"
ip -n $L route replace 10.0.9.0/24 via 10.0.20.2 dev lx
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 55000:4 --rate 100 --burst 40 \
  >"$WORK/after" || fail "driver exit $?"
ip netns exec $D iptables -A INPUT -p udp --dport 4791 -j DROP  # and silent: what a RoCE NIC does
ip netns exec $S "$DRIVER" --source 10.0.1.2 --dest 10.0.9.2 --dev s0 --sports 55000:4 --rate 100 --burst 40 \
  >"$WORK/after_silent" || fail "driver exit $?"
head -1 "$WORK/before"; head -1 "$WORK/after"; head -1 "$WORK/after_silent"
[[ $(grep -cE ' result=complete .*hops=10\.0\.1\.1,10\.0\.1[012]\.2,10\.0\.9\.2$' "$WORK/before") -eq 4 ]] || fail "before: not L,R,D"
[[ $(grep -c ' result=complete .*hops=10.0.1.1,10.0.20.2,10.0.21.2,10.0.9.2$' "$WORK/after") -eq 4 ]] || fail "grown: not L,X,R,D"
[[ $(grep -c ' result=partial .*hops=10.0.1.1,10.0.20.2,10.0.21.2$' "$WORK/after_silent") -eq 4 ]] ||
  fail "grown, D silent: not L,X,R partial (a destination added from an old distance?)"
ip netns del ${P}x

if [[ $FAIL -ne 0 ]]; then echo "netns_tracer: FAILED"; exit 1; fi
echo "netns_tracer: PASS"
