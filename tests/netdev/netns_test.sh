#!/usr/bin/env bash
# netns test of the netdev collector: in network namespaces this script creates (and always
# removes), a veth pair is a real SIOCETHTOOL target. The exporter runs inside the first
# namespace (ip netns exec) on a fixture sysfs tree whose RoCE port's netdev is the veth, so:
#   * the allow-listed ethtool statistics equal `ethtool -S` through the real ioctl,
#   * they move with UDP traffic sent from the peer namespace,
#   * veth's missing pause/DCB support (EOPNOTSUPP) is a capability at 0, not an error, a netdev
#     named in the tree but absent from the namespace is counted once, and ECN still comes from the tree;
#   * a bonded RoCE port (gid_attrs names bond0, the tree's bond0 has slaves vC and vE): each
#     slave is read through the kernel with its own values, the bond itself not at all;
#   * ethtool netlink link state follows vA's carrier (peer down and up); FEC_GET answers
#     EOPNOTSUPP on veth, the real kernel's negative case: a capability at 0, not an error;
#   * a netdev the tree gives another ifindex than this namespace's netdev of that name (lo) is
#     not read through the kernel: state, no error.
# Usage: netns_test.sh --exporter PATH   (root; without root or a tool it fails)
set -uo pipefail

source "$(dirname "$0")/../lib/exporter_arg.sh"
source "$(dirname "$0")/../lib/common.sh"
[[ -x "$EXPORTER" ]] || { echo "FATAL: $EXPORTER is not executable"; exit 2; }
if [[ $(id -u) -ne 0 ]]; then echo "FATAL: the netns test needs root (ip netns add, veth)"; exit 1; fi
for tool in ip ethtool curl promtool; do
  command -v $tool >/dev/null || { echo "FATAL: $tool is not installed (scripts/install-deps.sh)"; exit 1; }
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
if ! ip netns add "$NS" 2>"$WORK/err"; then echo "FATAL: cannot create a network namespace: $(cat "$WORK/err")"; exit 1; fi
ip netns add "$NS2" || { echo "FATAL: second netns"; exit 1; }

in_ns() { ip netns exec "$NS" "$@"; }

# No IPv6: no router solicitations or DAD packets move the counters on their own.
for n in "$NS" "$NS2"; do
  ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$NS" link add vA type veth peer name vB netns "$NS2" || { echo "FATAL: veth"; exit 1; }
ip -n "$NS" addr add 10.99.0.1/24 dev vA
ip -n "$NS2" addr add 10.99.0.2/24 dev vB
for pair in "vC vD" "vE vF"; do
  read -r a b <<<"$pair"
  ip -n "$NS" link add "$a" type veth peer name "$b" netns "$NS2" || { echo "FATAL: veth"; exit 1; }
  ip -n "$NS" link set "$a" up
  ip -n "$NS2" link set "$b" up
done
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
mk_dev rxe_lo lo
mk_ecn vA "3" "3 5"
mk_ecn ndgone0 "" "3"
# mlx5-style RoCE LAG: the port's GIDs name bond0 (which this namespace need not have); the
# tree's bond0 lists the slaves, which the tree gives their real ifindex here.
mkdir -p "$TREE/class/infiniband/mlx5_bond_0/ports/1/gid_attrs/ndevs" "$TREE/class/net/bond0/bonding"
echo Ethernet >"$TREE/class/infiniband/mlx5_bond_0/ports/1/link_layer"
echo bond0 >"$TREE/class/infiniband/mlx5_bond_0/ports/1/gid_attrs/ndevs/0"
echo "vC vE" >"$TREE/class/net/bond0/bonding/slaves"
for nd in vC vE; do mkdir -p "$TREE/class/net/$nd" && in_ns cat "/sys/class/net/$nd/ifindex" >"$TREE/class/net/$nd/ifindex"; done
# the tree's lo is not this namespace's lo
mkdir -p "$TREE/class/net/lo" && echo 1000001 >"$TREE/class/net/lo/ifindex"

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
# scrape, value, expect_value, expect_absent: tests/lib/common.sh, through the namespace
SCRAPE_VIA="ip netns exec $NS"
SCRAPE_URL=http://127.0.0.1:9661/metrics
EXPORTER_LOG=$WORK/exporter.log
ethtool_stat() { in_ns ethtool -S "${2:-vA}" | awk -v s="$1" -F': *' '{ gsub(/^ +/, "", $1) } $1 == s { print $2 }'; }

compare_with_ethtool() {  # FILE
  local s want
  for s in ${STATS//,/ }; do
    want=$(ethtool_stat "$s")
    expect_value "$1" "$want" rdma_netdev_ethtool_stat device=rxe_nd netdev=vA stat="$s"
  done
}

echo "== before traffic"
M1=$WORK/m1
scrape "$M1"
compare_with_ethtool "$M1"
before=$(value "$M1" rdma_netdev_ethtool_stat netdev=vA stat=rx_queue_0_xdp_packets)
expect_value "$M1" 1 rdma_netdev_present netdev=vA
expect_value "$M1" 1 rdma_netdev_info netdev=vA driver=veth
expect_value "$M1" 0 rdma_netdev_present netdev=ndgone0

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
after=$(value "$M2" rdma_netdev_ethtool_stat netdev=vA stat=rx_queue_0_xdp_packets)
if [[ -n "$before" && -n "$after" ]] && ((after >= before + 50)); then ok "rx_queue_0_xdp_packets moved $before -> $after"
else bad "rx_queue_0_xdp_packets did not move by 50: '$before' -> '$after'"; fi

echo "== bond slaves: each its own, the bond not read; the tree's lo is not this kernel's"
want_c=$(ethtool_stat peer_ifindex vC)
want_e=$(ethtool_stat peer_ifindex vE)
[[ -n "$want_c" && "$want_c" != "$want_e" ]] && ok "vC and vE have their own peer_ifindex ($want_c, $want_e)" ||
  bad "peer_ifindex of vC '$want_c', vE '$want_e'"
for nd in vC vE; do
  expect_value "$M2" 1 rdma_netdev_present device=mlx5_bond_0 port=1 netdev="$nd"
done
expect_value "$M2" "$want_c" rdma_netdev_ethtool_stat device=mlx5_bond_0 port=1 netdev=vC stat=peer_ifindex
expect_value "$M2" "$want_e" rdma_netdev_ethtool_stat device=mlx5_bond_0 port=1 netdev=vE stat=peer_ifindex
if grep -q 'netdev="bond0"' "$M2"; then bad "bond0 itself was read"; else ok "no series of bond0 itself"; fi
expect_value "$M2" 0 rdma_netdev_present device=rxe_lo port=1 netdev=lo
if grep -q '^rdma_netdev_info.*netdev="lo"' "$M2"; then bad "the tree's lo was read through ethtool"; else ok "the tree's lo not read through ethtool"; fi
n=$(grep -c "not this kernel's" "$WORK/exporter.log")
if [[ "$n" == 1 ]] && grep "not this kernel's" "$WORK/exporter.log" | grep -q '\blo\b'; then ok "one log line for the tree's lo"
else bad "$n log lines for netdevs not this kernel's"; fi

echo "== ethtool netlink link state follows the carrier; veth has no FEC: a capability at 0"
expect_value "$M2" 1 rdma_netdev_link_up device=rxe_nd port=1 netdev=vA
ip -n "$NS2" link set vB down  # the peer down takes vA's carrier off
MD=$WORK/mdown
scrape "$MD"
expect_value "$MD" 0 rdma_netdev_link_up device=rxe_nd port=1 netdev=vA
if grep -q '^rdma_netdev_link_down_reason_info' "$MD"; then bad "veth gave a link down reason"; else ok "no down reason from veth (no extended state)"; fi
ip -n "$NS2" link set vB up
if grep -q '^rdma_netdev_fec_' "$MD"; then bad "FEC series on veth"; else ok "no FEC series on veth"; fi

echo "== sysfs parts, errors counted once"
M3=$WORK/m3
scrape "$M3"
expect_value "$M3" 1 rdma_netdev_ecn_enabled netdev=vA role=np priority=3
expect_value "$M3" 0 rdma_netdev_ecn_enabled netdev=vA role=np priority=5
expect_value "$M3" 1 rdma_netdev_ecn_enabled netdev=vA role=rp priority=5
expect_value "$M3" 48 rdma_netdev_dcqcn_parameter netdev=vA role=np parameter=cnp_dscp
expect_value "$M3" 1 rdma_netdev_ecn_enabled netdev=ndgone0 role=rp priority=3
# veth: no DCB -> PFC unknown; ndgone0: ECN np off on priority 3 -> ecn_disabled
expect_value "$M3" 0 rdma_netdev_roce_priority_consistent device=rxe_nd port=1 priority=3 reason=pfc_unknown
expect_value "$M3" 0 rdma_netdev_roce_priority_consistent device=rxe_gone port=1 priority=3 reason=ecn_disabled
# three scrapes: ndgone0 missing counted once; veth's missing pause stats and DCB are what the
# netdev is (capabilities at 0), not errors; no netdev here has an ecn/ tree but vA and ndgone0
expect_absent "$M3" rdma_exporter_collector_errors_total collector=netdev reason=not_supported
expect_value "$M3" 1 rdma_exporter_collector_errors_total collector=netdev reason=netdev_missing
expect_value "$M3" 0 rdma_exporter_collector_capability collector=netdev capability=pause_stats
expect_value "$M3" 0 rdma_exporter_collector_capability collector=netdev capability=dcbnl
expect_value "$M3" 0 rdma_exporter_collector_capability collector=netdev capability=ethtool_fec
expect_value "$M3" 1 rdma_exporter_collector_capability collector=netdev capability=ethtool_linkstate
expect_value "$M3" 1 rdma_exporter_collector_success collector=netdev
n=$(grep -c '^rdma_netdev_' "$M3")
if ((n > 0 && n < 80)); then ok "$n rdma_netdev_ series (bounded)"; else bad "$n rdma_netdev_ series"; fi

if out=$(promtool check metrics <"$M3" 2>&1); then ok "promtool check metrics"; else bad "promtool: $out"; fi

if ! tally "netdev netns"; then
  echo "--- exporter log:"; cat "$WORK/exporter.log"; echo "--- last scrape:"; grep -v '^#' "$M3"
  exit 1
fi
exit 0
