#!/bin/bash
# A routed, multi-rail RoCE v2 fabric with ECMP, built inside the test guest (kernel 6.1) beside
# the default veth0/veth1 lab. Guest tests that need it call `ecmp-fabric.sh up` first; in
# `vm-run.sh --shell` it can be built by hand the same way.
#
#   host A NICs a<r> (rxe rxeA<r>) -- router L<r> ==path x== router R<r> -- host B NICs b<r> (rxe rxeB<r>)
#                                                 ==path y==
# One rail r = 1..RAILS: 10.<r>.1.0/24 on A's side (a<r> = 10.<r>.1.2), 10.<r>.2.0/24 on B's side
# (b<r> = 10.<r>.2.2). The routers are network namespaces joined by two parallel veth links and an
# ECMP route hashed on L4 (fib_multipath_hash_policy=1): each RC QP (rxe derives its UDP source
# port from its GRH flow label, or from the QP numbers without one) takes one path for its life, as
# flows do on a leaf/spine fabric.
#
# Why the host NICs stay in the initial namespace: in 6.1 rxe's UDP/4791 socket and its route
# lookup exist only in init_net. Both "hosts" therefore share one namespace; rxe routes with
# oif = its netdev, which skips the local route, so the packets really cross the routers. TCP
# between the hosts' addresses (the prober's handshake) goes over lo.
#
# usage (guest, root):
#   ecmp-fabric.sh up [RAILS]        build it (default 2 rails); waits for ACTIVE ports and IPv4 GIDs
#   ecmp-fabric.sh drop RAIL PATH    silently drop what arrives at R<RAIL> over PATH (x|y): A -> B only
#   ecmp-fabric.sh heal RAIL PATH
#   ecmp-fabric.sh nic RAIL a|b down|up  a host NIC down (its rxe port leaves ACTIVE) or up again,
#                                    with its route to the other side back
#   ecmp-fabric.sh count RAIL        packets L<RAIL> sent over each path (A -> B): "x: N y: M"
#   ecmp-fabric.sh path RAIL SPORT   the path (x|y) L<RAIL> routes A -> B RoCE v2 packets with UDP
#                                    source port SPORT on (rxe derives it from the QP's GRH flow
#                                    label, or from the two QP numbers without one)
# The drop is a FIB rule (`ip rule ... blackhole`): no qdisc module in the guest.
set -u
e() { ip netns exec "$@"; }
die() { echo "ecmp-fabric: $*" >&2; exit 1; }

cmd=${1:-up}
case $cmd in
  up)
    RAILS=${2:-2}
    sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.all.rp_filter=0 \
      net.ipv4.conf.default.rp_filter=0 net.ipv4.conf.default.accept_local=1 || die "sysctl"
    # one `ip -batch` per namespace and one shell per router's sysctls: under TCG on a loaded host
    # every fork costs tens of milliseconds
    for r in $(seq "$RAILS"); do
      ip netns add L$r && ip netns add R$r || die "netns L$r/R$r"
    done
    for r in $(seq "$RAILS"); do
      L=L$r R=R$r
      ip -batch - <<IP || die "rail $r: links in the initial namespace"
link add a$r type veth peer name a${r}p netns $L
link add b$r type veth peer name b${r}p netns $R
link add x${r}l netns $L type veth peer name x${r}r netns $R
link add y${r}l netns $L type veth peer name y${r}r netns $R
addr add 10.$r.1.2/24 dev a$r
addr add 10.$r.2.2/24 dev b$r
link set a$r up
link set b$r up
route add 10.$r.2.0/24 via 10.$r.1.1 dev a$r metric 10
route add 10.$r.1.0/24 via 10.$r.2.1 dev b$r metric 10
IP
      for d in a$r b$r; do
        echo 1 >/proc/sys/net/ipv4/conf/$d/accept_local && echo 0 >/proc/sys/net/ipv4/conf/$d/rp_filter || die "sysctl $d"
      done
      ip -n $L -batch - <<IP || die "rail $r: router $L"
addr add 10.$r.1.1/24 dev a${r}p
addr add 10.$((100 + r)).1.1/30 dev x${r}l
addr add 10.$((100 + r)).2.1/30 dev y${r}l
link set lo up
link set a${r}p up
link set x${r}l up
link set y${r}l up
IP
      ip -n $R -batch - <<IP || die "rail $r: router $R"
addr add 10.$r.2.1/24 dev b${r}p
addr add 10.$((100 + r)).1.2/30 dev x${r}r
addr add 10.$((100 + r)).2.2/30 dev y${r}r
link set lo up
link set b${r}p up
link set x${r}r up
link set y${r}r up
IP
      for n in $L $R; do
        e $n sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward && echo 1 >/proc/sys/net/ipv4/fib_multipath_hash_policy &&
                    echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter' || die "sysctl in $n"
      done
      ip -n $L route add 10.$r.2.0/24 nexthop via 10.$((100 + r)).1.2 dev x${r}l nexthop via 10.$((100 + r)).2.2 dev y${r}l ||
        die "ECMP route in $L"
      ip -n $R route add 10.$r.1.0/24 nexthop via 10.$((100 + r)).1.1 dev x${r}r nexthop via 10.$((100 + r)).2.1 dev y${r}r ||
        die "ECMP route in $R"
      # rxe only once the netdevs are up: a carrier change after `rdma link add` is a port down
      rdma link add rxeA$r type rxe netdev a$r || die "rdma link add rxeA$r"
      rdma link add rxeB$r type rxe netdev b$r || die "rdma link add rxeB$r"
    done
    # ready = every port ACTIVE with its IPv4-mapped RoCE v2 GID; bounded by attempts
    for _ in $(seq 100); do
      ok=1
      for r in $(seq "$RAILS"); do
        for s in A:1 B:2; do
          p=/sys/class/infiniband/rxe${s%:*}$r/ports/1
          grep -q ACTIVE "$p/state" 2>/dev/null || ok=0
          grep -qs ":ffff:0a0$r:0${s#*:}02" "$p"/gids/* || ok=0
        done
      done
      ((ok)) && break
      sleep 0.1
    done
    ((ok)) || { rdma link show; die "ports not ACTIVE with their IPv4 GIDs"; }
    echo "ecmp-fabric: $RAILS rail(s) up: $(cd /sys/class/infiniband && echo rxe[AB]*)"
    ;;
  drop) ip -n R$2 rule add iif "${3}$2r" priority 10 blackhole ;;
  heal) ip -n R$2 rule del iif "${3}$2r" priority 10 blackhole ;;
  nic)
    r=$2 side=$3 far=2 gw=1
    [[ $side == b ]] && far=1 gw=2
    ip link set "$side$r" "$4" || die "ip link set $side$r $4"
    # an administrative down flushes the routes through the device
    if [[ $4 == up ]]; then
      ip route replace 10.$r.$far.0/24 via 10.$r.$gw.1 dev "$side$r" metric 10 || die "route $side$r"
    fi
    ;;
  count) echo "x: $(e L$2 cat /sys/class/net/x$2l/statistics/tx_packets) y: $(e L$2 cat /sys/class/net/y$2l/statistics/tx_packets)" ;;
  path)
    # the input route L<RAIL> takes for a RoCE v2 packet from a<RAIL> to b<RAIL> with the QP's source
    # port (the kernel hashes the same L4 keys as for the real packet)
    out=$(ip -n L$2 route get 10.$2.2.2 from 10.$2.1.2 iif a$2p ipproto udp sport "$3" dport 4791) ||
      die "ip route get"
    case $out in
      *" dev x$2l"*) echo x ;;
      *" dev y$2l"*) echo y ;;
      *) die "no path in: $out" ;;
    esac
    ;;
  *) sed -n '2,25p' "$0"; exit 2 ;;
esac
