#!/usr/bin/env bash
# netns test of the netdev collector: in network namespaces this script creates (and always
# removes), a veth pair is a real SIOCETHTOOL target. The exporter runs inside the first
# namespace (ip netns exec) on a fixture sysfs tree whose RoCE port's netdev is the veth, so:
#   * the allow-listed ethtool statistics equal `ethtool -S` through the real ioctl,
#   * they move with UDP traffic sent from the peer namespace,
#   * veth's missing pause/DCB support (EOPNOTSUPP) is a capability at 0, not an error, a netdev named
#     in the tree but absent from the namespace once, and ECN still comes from the tree.
# Usage: netns_test.sh RDMA_EXPORTER_BINARY   (root; exits 77 = skipped otherwise)
set -uo pipefail

EXPORTER=${1:?usage: netns_test.sh RDMA_EXPORTER_BINARY}
[[ -x "$EXPORTER" ]] || { echo "FATAL: $EXPORTER is not executable"; exit 2; }
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: the netns test needs root (ip netns add, veth)"; exit 77; fi
for tool in ip ethtool curl; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

NS=rdmand$$a
NS2=rdmand$$b
WORK=$(mktemp -d /tmp/netdev-netns.XXXXXX)
EXPORTER_PID=
cleanup() {
  if [[ -n "$EXPORTER_PID" ]]; then kill "$EXPORTER_PID" 2>/dev/null; wait "$EXPORTER_PID" 2>/dev/null; fi
  ip netns del "$NS" 2>/dev/null
  ip netns del "$NS2" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
if ! ip netns add "$NS" 2>"$WORK/err"; then echo "SKIP: cannot create a network namespace: $(cat "$WORK/err")"; exit 77; fi
ip netns add "$NS2" || { echo "FATAL: second netns"; exit 1; }

OK=0
FAILED=0
ok() { echo "  ok: $*"; OK=$((OK + 1)); }
bad() { echo "  FAIL: $*"; FAILED=$((FAILED + 1)); }
in_ns() { ip netns exec "$NS" "$@"; }

# No IPv6: no router solicitations or DAD packets move the counters on their own.
for n in "$NS" "$NS2"; do
  ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$NS" link add vA type veth peer name vB netns "$NS2" || { echo "FATAL: veth"; exit 1; }
ip -n "$NS" addr add 10.99.0.1/24 dev vA
ip -n "$NS2" addr add 10.99.0.2/24 dev vB
ip -n "$NS" link set lo up
ip -n "$NS" link set vA up
ip -n "$NS2" link set vB up
# GRO on and TSO off: veth receives through its NAPI ring, whose per-queue counters
# (rx_queue_0_xdp_packets/_bytes) then count every packet.
in_ns ethtool -K vA gro on tso off >/dev/null
ip netns exec "$NS2" ethtool -K vB gro on tso off >/dev/null

# Fixture tree: rxe_nd (netdev vA via parent) with ECN files; rxe_gone on a netdev that does
# not exist in the namespace, with ECN files too.
TREE=$WORK/sys
mk_dev() {  # name netdev
  local d=$TREE/class/infiniband/$1
  mkdir -p "$d/ports/1"
  echo "$2" >"$d/parent"
  echo Ethernet >"$d/ports/1/link_layer"
  echo "4: ACTIVE" >"$d/ports/1/state"
}
mk_ecn() {  # netdev np_enabled_prios rp_enabled_prios
  local e=$TREE/class/net/$1/ecn p
  mkdir -p "$e/roce_np/enable" "$e/roce_rp/enable"
  for p in 0 1 2 3 4 5 6 7; do
    [[ " $2 " == *" $p "* ]] && echo 1 >"$e/roce_np/enable/$p" || echo 0 >"$e/roce_np/enable/$p"
    [[ " $3 " == *" $p "* ]] && echo 1 >"$e/roce_rp/enable/$p" || echo 0 >"$e/roce_rp/enable/$p"
  done
  echo 48 >"$e/roce_np/cnp_dscp"
  echo 1 >"$e/roce_rp/rpg_min_rate"
}
mk_dev rxe_nd vA
mk_dev rxe_gone ndgone0
mk_ecn vA "3" "3 5"
mk_ecn ndgone0 "" "3"

STATS=rx_queue_0_xdp_packets,rx_queue_0_xdp_bytes,peer_ifindex
# Not through in_ns: a backgrounded shell function is a subshell, and $! would be that subshell
# rather than the exporter (ip netns exec execs into it), which cleanup must stop.
ip netns exec "$NS" "$EXPORTER" --web.listen-address=127.0.0.1:9661 --path.sysfs="$TREE" --log.level=debug \
  --collector.disable-defaults --collector.netdev --collector.netdev.extra-stats="$STATS" >"$WORK/exporter.log" 2>&1 &
EXPORTER_PID=$!
for i in $(seq 200); do
  in_ns curl -sf -o /dev/null http://127.0.0.1:9661/metrics && break
  kill -0 "$EXPORTER_PID" 2>/dev/null || { echo "FATAL: exporter exited"; cat "$WORK/exporter.log"; exit 1; }
  sleep 0.1
done
scrape() { in_ns curl -sf -o "$1" http://127.0.0.1:9661/metrics || { echo "FATAL: scrape failed"; exit 1; }; }
# value FILE NAME LABELS-REGEX: the value of the one sample of NAME whose label text matches
value() { awk -v n="$2" -v re="$3" '$0 !~ /^#/ { split($0, a, "{"); if (a[1] == n && $0 ~ re) print $NF }' "$1"; }
ethtool_stat() { in_ns ethtool -S vA | awk -v s="$1" -F': *' '{ gsub(/^ +/, "", $1) } $1 == s { print $2 }'; }
expect() {  # FILE WANT NAME LABELS-REGEX
  local got; got=$(value "$1" "$3" "$4")
  if [[ "$got" == "$2" ]]; then ok "$3{$4} = $got"; else bad "$3{$4} = '${got}', expected $2"; fi
}

compare_with_ethtool() {  # FILE
  local s want
  for s in ${STATS//,/ }; do
    want=$(ethtool_stat "$s")
    expect "$1" "$want" rdma_netdev_ethtool_stat "device=\"rxe_nd\".*netdev=\"vA\".*stat=\"$s\""
  done
}

echo "== before traffic"
M1=$WORK/m1
scrape "$M1"
compare_with_ethtool "$M1"
before=$(value "$M1" rdma_netdev_ethtool_stat 'stat="rx_queue_0_xdp_packets"')
expect "$M1" 1 rdma_netdev_present 'netdev="vA"'
expect "$M1" 1 rdma_netdev_info 'netdev="vA",driver="veth"'
expect "$M1" 0 rdma_netdev_present 'netdev="ndgone0"'

echo "== 50 UDP datagrams vB -> vA"
ip netns exec "$NS2" bash -c 'for i in $(seq 50); do echo payload >/dev/udp/10.99.0.1/9; done'
for i in $(seq 100); do  # NAPI runs asynchronously: wait (bounded) until vA has counted them
  now=$(ethtool_stat rx_queue_0_xdp_packets)
  ((now >= before + 50)) && break
  sleep 0.05
done
M2=$WORK/m2
scrape "$M2"
compare_with_ethtool "$M2"
after=$(value "$M2" rdma_netdev_ethtool_stat 'stat="rx_queue_0_xdp_packets"')
if [[ -n "$before" && -n "$after" ]] && ((after >= before + 50)); then ok "rx_queue_0_xdp_packets moved $before -> $after"
else bad "rx_queue_0_xdp_packets did not move by 50: '$before' -> '$after'"; fi

echo "== sysfs parts, errors counted once"
M3=$WORK/m3
scrape "$M3"
expect "$M3" 1 rdma_netdev_ecn_enabled 'netdev="vA",role="np",priority="3"'
expect "$M3" 0 rdma_netdev_ecn_enabled 'netdev="vA",role="np",priority="5"'
expect "$M3" 1 rdma_netdev_ecn_enabled 'netdev="vA",role="rp",priority="5"'
expect "$M3" 48 rdma_netdev_dcqcn_parameter 'netdev="vA",role="np",parameter="cnp_dscp"'
expect "$M3" 1 rdma_netdev_ecn_enabled 'netdev="ndgone0",role="rp",priority="3"'
# veth: no DCB -> PFC unknown; ndgone0: ECN np off on priority 3 -> ecn_disabled
expect "$M3" 0 rdma_netdev_roce_priority_consistent 'device="rxe_nd",port="1",priority="3",reason="pfc_unknown"'
expect "$M3" 0 rdma_netdev_roce_priority_consistent 'device="rxe_gone",port="1",priority="3",reason="ecn_disabled"'
# three scrapes: ndgone0 missing counted once; veth's missing pause stats and DCB are what the
# netdev is (capabilities at 0), not errors; no netdev here has an ecn/ tree but vA and ndgone0
expect "$M3" "" rdma_exporter_collector_errors_total 'collector="netdev",reason="not_supported"'
expect "$M3" 1 rdma_exporter_collector_errors_total 'collector="netdev",reason="netdev_missing"'
expect "$M3" 0 rdma_exporter_collector_capability 'collector="netdev",capability="pause_stats"'
expect "$M3" 0 rdma_exporter_collector_capability 'collector="netdev",capability="dcbnl"'
expect "$M3" 1 rdma_exporter_collector_success 'collector="netdev"'
n=$(grep -c '^rdma_netdev_' "$M3")
if ((n > 0 && n < 60)); then ok "$n rdma_netdev_ series (bounded)"; else bad "$n rdma_netdev_ series"; fi

if command -v promtool >/dev/null; then
  if out=$(promtool check metrics <"$M3" 2>&1); then ok "promtool check metrics"; else bad "promtool: $out"; fi
else
  echo "  (promtool not installed: not checked)"
fi

echo "netdev netns: $OK checks ok, $FAILED failed"
if ((FAILED > 0 || OK == 0)); then
  echo "--- exporter log:"; cat "$WORK/exporter.log"; echo "--- last scrape:"; grep -v '^#' "$M3"
  exit 1
fi
exit 0
