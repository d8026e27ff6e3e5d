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
# With `spines` (path tracing, vm.prober.trace*) each rail has three paths x, y, z through spine
# routers, each its own namespace:
#
#   a<r> -- L<r> --x<r>l-- S<r>x --x<r>r-- R<r> -- b<r>     (and the same through S<r>y, S<r>z)
#
# L's and R's interface names stay (x<r>l, x<r>r, ...) so drop/heal/count/path mean what they mean
# without spines. Addresses of path p (x, y, z = 1, 2, 3): L p<r>l 10.<100+r>.<p>.1/30, spine
# "sl" 10.<100+r>.<p>.2/30; spine "sr" 10.<100+r>.<10+p>.1/30, R p<r>r 10.<100+r>.<10+p>.2/30.
# What a hop answers a TTL-expired packet from (icmp_errors_use_inbound_ifaddr):
#   L: 10.<r>.1.1 either way (the packet enters and the error leaves on a<r>p);
#   spine: its "sl" address either way (enters on sl, the error goes back on sl): it names the path;
#   R: =1 the address of the path the packet came in on; =0 the address of the path R's own ECMP
#      route back to A picks for the error (hashed on the expired packet's 5-tuple, which the
#      kernel hashes symmetrically), so not necessarily the flow's path.
# The routers' ICMP limits are a switch's (see set_icmp_limits).
#
# usage (guest, root):
#   ecmp-fabric.sh up [RAILS] [spines]  build it (default 2 rails, two paths x, y; `spines`: three
#                                    paths x, y, z through spine routers); waits for ACTIVE ports and IPv4 GIDs
#   ecmp-fabric.sh drop RAIL PATH    silently drop what arrives at R<RAIL> over PATH (x|y|z): A -> B only
#   ecmp-fabric.sh heal RAIL PATH
#   ecmp-fabric.sh drop-return RAIL PATH   (spines) silently drop RoCE v2 (UDP 4791) arriving at
#                                    L<RAIL> over PATH: B -> A only (ICMP answers still pass)
#   ecmp-fabric.sh heal-return RAIL PATH
#   ecmp-fabric.sh silent RAIL PATH  (spines) spine S<RAIL>PATH sends no ICMP any more but forwards
#   ecmp-fabric.sh unsilent RAIL PATH
#   ecmp-fabric.sh inbound-ifaddr 0|1  icmp_errors_use_inbound_ifaddr on every router (default 0)
#   ecmp-fabric.sh route RAIL a|b SPORT...  (spines) per SPORT one line "SPORT HOP1 HOP2 HOP3 path P":
#                                    the addresses a trace from a<RAIL> (b<RAIL> with b) with that
#                                    UDP source port to port 4791 gets from the three routers, from
#                                    their own route lookups and the inbound-ifaddr setting, and
#                                    the path P (x|y|z) it takes
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
LAYOUT=/run/ecmp-fabric.layout  # "direct" or "spines", written by `up`
PATHS="x y z"
pidx() { case $1 in x) echo 1 ;; y) echo 2 ;; z) echo 3 ;; *) die "no path '$1' (x|y|z)" ;; esac; }
spines() { [[ $(cat "$LAYOUT" 2>/dev/null) == spines ]]; }
need_spines() { spines || die "$cmd needs the spine layout (up RAILS spines)"; }
routers() {
  local r p
  for r in $(seq "$(cat "$LAYOUT.rails")"); do
    echo L$r R$r
    if spines; then for p in $PATHS; do echo S$r$p; done; fi
  done
}

# ICMP limits as a switch's. A SONiC switch traps TTL-expired packets to its CPU through CoPP:
# ttl_error is in no COPP_TRAP entry of files/image_config/copp/copp_cfg.j2, so the "default"
# group polices it, sr_tcm cir 600 / cbs 600 packets per second; its Linux kernel then sends the
# time-exceeded under its own per-destination limit (icmp_ratelimit, default 1000 ms, a burst of
# 6; SONiC's image config sets no icmp sysctl that we found). On the guest's 6.1.0-57 all four
# (icmp_ratelimit, icmp_ratemask, icmp_msgs_per_sec, icmp_msgs_burst) are per network namespace
# (a value written in one leaves init_net's as it was), so each router gets its own.
set_icmp_limits() {
  local n
  for n in $(routers); do
    e $n sh -c 'echo 600 >/proc/sys/net/ipv4/icmp_msgs_per_sec && echo 600 >/proc/sys/net/ipv4/icmp_msgs_burst &&
                echo 1000 >/proc/sys/net/ipv4/icmp_ratelimit && echo 6168 >/proc/sys/net/ipv4/icmp_ratemask' ||
      die "icmp limits in $n"
  done
}

# spine_rail R: three spine namespaces between L<R> and R<R>, ECMP over them on both routers
spine_rail() {
  local r=$1 L=L$1 R=R$1 p i S
  for p in $PATHS; do
    i=$(pidx $p) S=S$r$p
    ip netns add $S || die "netns $S"
    ip -batch - <<IP || die "rail $r: links of $S"
link add ${p}${r}l netns $L type veth peer name sl netns $S
link add ${p}${r}r netns $R type veth peer name sr netns $S
IP
    ip -n $S -batch - <<IP || die "rail $r: spine $S"
addr add 10.$((100 + r)).$i.2/30 dev sl
addr add 10.$((100 + r)).$((10 + i)).1/30 dev sr
link set lo up
link set sl up
link set sr up
route add 10.$r.1.0/24 via 10.$((100 + r)).$i.1 dev sl
route add 10.$r.2.0/24 via 10.$((100 + r)).$((10 + i)).2 dev sr
IP
    ip -n $L -batch - <<IP || die "rail $r: $L towards $S"
addr add 10.$((100 + r)).$i.1/30 dev ${p}${r}l
link set ${p}${r}l up
IP
    ip -n $R -batch - <<IP || die "rail $r: $R towards $S"
addr add 10.$((100 + r)).$((10 + i)).2/30 dev ${p}${r}r
link set ${p}${r}r up
IP
    e $S sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward && echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter' || die "sysctl in $S"
  done
  # Hash the 5-tuple read from the headers, as a switch does: policy 3 with the fields source and
  # destination address, protocol, source and destination port (0x37). Policy 1 takes a hash the
  # packet already carries (skb->l4_hash), and a connected UDP socket's packets carry the
  # socket's random txhash into the routers' namespaces over veth (no wire strips it): a tracer
  # that connect()s would be routed by that, not by its 5-tuple. Symmetric like policy 1.
  for n in $L $R; do
    e $n sh -c 'echo 0x37 >/proc/sys/net/ipv4/fib_multipath_hash_fields && echo 3 >/proc/sys/net/ipv4/fib_multipath_hash_policy' ||
      die "hash policy in $n"
  done
  ip -n $L route add 10.$r.2.0/24 nexthop via 10.$((100 + r)).1.2 dev x${r}l nexthop via 10.$((100 + r)).2.2 dev y${r}l \
    nexthop via 10.$((100 + r)).3.2 dev z${r}l || die "ECMP route in $L"
  ip -n $R route add 10.$r.1.0/24 nexthop via 10.$((100 + r)).11.1 dev x${r}r nexthop via 10.$((100 + r)).12.1 dev y${r}r \
    nexthop via 10.$((100 + r)).13.1 dev z${r}r || die "ECMP route in $R"
}

# dev_path DEV: x|y|z of a router interface name (x1l -> x)
dev_path() { echo "${1:0:1}"; }

# addr_of NS DEV: the address of router NS's interface DEV, from the plan above
addr_of() {
  local ns=$1 dev=$2 r=${1:1:1} i
  case $ns:$dev in
    L*:a*p) echo 10.$r.1.1 ;;
    R*:b*p) echo 10.$r.2.1 ;;
    L*:?${r}l) i=$(pidx "${dev:0:1}"); echo 10.$((100 + r)).$i.1 ;;
    R*:?${r}r) i=$(pidx "${dev:0:1}"); echo 10.$((100 + r)).$((10 + i)).2 ;;
    S*:sl) i=$(pidx "${ns:2:1}"); echo 10.$((100 + r)).$i.2 ;;
    S*:sr) i=$(pidx "${ns:2:1}"); echo 10.$((100 + r)).$((10 + i)).1 ;;
    *) die "no address for $dev in $ns" ;;
  esac
}

# lookup NS LINE...: the output device of each `ip route get` LINE in router NS (one `ip -batch`),
# one a line
lookup() {
  local ns=$1; shift
  printf 'route get %s\n' "$@" | ip -n "$ns" -batch - | sed -n 's/.* dev \([^ ]*\).*/\1/p'
}

# route_hops RAIL a|b SPORT...: per SPORT "SPORT HOP1 HOP2 HOP3 path P" (see usage). The routers
# decide: the first router's input lookup of the flow's packet gives its path; with
# inbound-ifaddr 1 a router answers from the interface the packet came in on; with 0 from the one
# its route back to the tracer leaves by, which is the input lookup of the reverse packet (the
# 5-tuple reversed: the kernel's multipath hash is symmetric) on that interface.
route_hops() {
  local r=$1 from=$2 src dst first last iif back in mode sp i p
  shift 2
  local sports=("$@")
  if [[ $from == a ]]; then
    src=10.$r.1.2 dst=10.$r.2.2 first=L$r iif=a${r}p last=R$r in=sl back=r
  else
    src=10.$r.2.2 dst=10.$r.1.2 first=R$r iif=b${r}p last=L$r in=sr back=l
  fi
  mode=$(cat "$LAYOUT.inbound" 2>/dev/null || echo 0)
  local -a fwd ans1 ans3 lines
  lines=()
  for sp in "${sports[@]}"; do lines+=("$dst from $src iif $iif ipproto udp sport $sp dport 4791"); done
  mapfile -t fwd <<<"$(lookup $first "${lines[@]}")"
  ((${#fwd[@]} == ${#sports[@]})) || die "route lookups in $first: ${fwd[*]}"
  if ((mode == 1)); then
    for i in "${!sports[@]}"; do ans1[i]=$iif ans3[i]=$(dev_path "${fwd[i]}")$r$back; done
  else
    lines=()
    for sp in "${sports[@]}"; do lines+=("$src from $dst iif $iif ipproto udp sport 4791 dport $sp"); done
    mapfile -t ans1 <<<"$(lookup $first "${lines[@]}")"
    lines=()
    for i in "${!sports[@]}"; do
      lines+=("$src from $dst iif $(dev_path "${fwd[i]}")$r$back ipproto udp sport 4791 dport ${sports[i]}")
    done
    mapfile -t ans3 <<<"$(lookup $last "${lines[@]}")"
    ((${#ans1[@]} == ${#sports[@]} && ${#ans3[@]} == ${#sports[@]})) || die "answer lookups: ${ans1[*]} / ${ans3[*]}"
  fi
  # the spine answers from its interface towards the tracer under both settings: the packet came
  # in on it, and its one route back leaves by it
  for i in "${!sports[@]}"; do
    p=$(dev_path "${fwd[i]}")
    echo "${sports[i]} $(addr_of $first "${ans1[i]}") $(addr_of S$r$p $in) $(addr_of $last "${ans3[i]}") path $p"
  done
}

cmd=${1:-up}
case $cmd in
  up)
    RAILS=${2:-2} layout=${3:-direct}
    [[ $layout == direct || $layout == spines ]] || die "layout '$layout' (direct|spines)"
    echo "$layout" >"$LAYOUT" && echo "$RAILS" >"$LAYOUT.rails" && rm -f "$LAYOUT.inbound" || die "$LAYOUT"
    [[ $layout == spines ]] || PATHS="x y"
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
addr add 10.$r.1.2/24 dev a$r
addr add 10.$r.2.2/24 dev b$r
link set a$r up
link set b$r up
route add 10.$r.2.0/24 via 10.$r.1.1 dev a$r metric 10
route add 10.$r.1.0/24 via 10.$r.2.1 dev b$r metric 10
IP
      if [[ $layout == direct ]]; then
        ip -batch - <<IP || die "rail $r: paths x, y"
link add x${r}l netns $L type veth peer name x${r}r netns $R
link add y${r}l netns $L type veth peer name y${r}r netns $R
IP
      fi
      for d in a$r b$r; do
        echo 1 >/proc/sys/net/ipv4/conf/$d/accept_local && echo 0 >/proc/sys/net/ipv4/conf/$d/rp_filter || die "sysctl $d"
      done
      ip -n $L -batch - <<IP || die "rail $r: router $L"
addr add 10.$r.1.1/24 dev a${r}p
link set lo up
link set a${r}p up
IP
      ip -n $R -batch - <<IP || die "rail $r: router $R"
addr add 10.$r.2.1/24 dev b${r}p
link set lo up
link set b${r}p up
IP
      if [[ $layout == direct ]]; then
        ip -n $L -batch - <<IP || die "rail $r: router $L"
addr add 10.$((100 + r)).1.1/30 dev x${r}l
addr add 10.$((100 + r)).2.1/30 dev y${r}l
link set x${r}l up
link set y${r}l up
IP
        ip -n $R -batch - <<IP || die "rail $r: router $R"
addr add 10.$((100 + r)).1.2/30 dev x${r}r
addr add 10.$((100 + r)).2.2/30 dev y${r}r
link set x${r}r up
link set y${r}r up
IP
      fi
      for n in $L $R; do
        e $n sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward && echo 1 >/proc/sys/net/ipv4/fib_multipath_hash_policy &&
                    echo 0 >/proc/sys/net/ipv4/conf/all/rp_filter' || die "sysctl in $n"
      done
      if [[ $layout == direct ]]; then
        ip -n $L route add 10.$r.2.0/24 nexthop via 10.$((100 + r)).1.2 dev x${r}l nexthop via 10.$((100 + r)).2.2 dev y${r}l ||
          die "ECMP route in $L"
        ip -n $R route add 10.$r.1.0/24 nexthop via 10.$((100 + r)).1.1 dev x${r}r nexthop via 10.$((100 + r)).2.1 dev y${r}r ||
          die "ECMP route in $R"
      else
        spine_rail $r
      fi
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
    [[ $layout == spines ]] && set_icmp_limits
    echo "ecmp-fabric: $RAILS rail(s) up ($layout): $(cd /sys/class/infiniband && echo rxe[AB]*)"
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
  drop-return) need_spines; pidx "$3" >/dev/null; ip -n L$2 rule add iif "${3}$2l" ipproto udp dport 4791 priority 11 blackhole ;;
  heal-return) need_spines; ip -n L$2 rule del iif "${3}$2l" ipproto udp dport 4791 priority 11 blackhole ;;
  # `iif lo` matches only what the spine sends itself (its own ICMP errors' route lookup fails:
  # nothing is sent), not the ICMP it forwards from R, nor the flows
  silent) need_spines; pidx "$3" >/dev/null; ip -n S$2$3 rule add iif lo ipproto icmp priority 12 blackhole ;;
  unsilent) need_spines; ip -n S$2$3 rule del iif lo ipproto icmp priority 12 blackhole ;;
  inbound-ifaddr)
    [[ ${2-} == 0 || ${2-} == 1 ]] || die "inbound-ifaddr 0|1"
    for n in $(routers); do
      e $n sh -c "echo $2 >/proc/sys/net/ipv4/icmp_errors_use_inbound_ifaddr" || die "inbound-ifaddr in $n"
    done
    echo "$2" >"$LAYOUT.inbound"
    ;;
  route) need_spines; route_hops "$2" "$3" "${@:4}" ;;
  count)
    if spines; then
      echo "x: $(e L$2 cat /sys/class/net/x$2l/statistics/tx_packets) y: $(e L$2 cat /sys/class/net/y$2l/statistics/tx_packets)" \
           "z: $(e L$2 cat /sys/class/net/z$2l/statistics/tx_packets)"
    else
      echo "x: $(e L$2 cat /sys/class/net/x$2l/statistics/tx_packets) y: $(e L$2 cat /sys/class/net/y$2l/statistics/tx_packets)"
    fi
    ;;
  path)
    # the input route L<RAIL> takes for a RoCE v2 packet from a<RAIL> to b<RAIL> with the QP's source
    # port (the kernel hashes the same L4 keys as for the real packet)
    out=$(ip -n L$2 route get 10.$2.2.2 from 10.$2.1.2 iif a$2p ipproto udp sport "$3" dport 4791) ||
      die "ip route get"
    case $out in
      *" dev x$2l"*) echo x ;;
      *" dev y$2l"*) echo y ;;
      *" dev z$2l"*) echo z ;;
      *) die "no path in: $out" ;;
    esac
    ;;
  *) sed -n '2,56p' "$0"; exit 2 ;;
esac
