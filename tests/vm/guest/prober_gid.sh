#!/bin/bash
# vm test: the source GID per link is the one on the netdev that reaches the peer, not the first
# of the family. veth0/veth1 get a second subnet (10.78.0.1 and .2/24), so rxe0 has two IPv4 RoCE
# v2 GIDs, 10.77.0.1 first; A probes B at 10.78.0.2: every RoCE v2 packet A sends comes from
# 10.78.0.1 (AF_PACKET capture, roce_capture.py), none from 10.77.0.1.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"

ip addr add 10.78.0.1/24 dev veth0 && ip addr add 10.78.0.2/24 dev veth1 || fatal "second subnet"
# has_gid DEV ADDR_HEX: rxe has the IPv4-mapped GID of that address (e.g. 0a4e:0001)
has_gid() { grep -qs "0000:0000:0000:0000:0000:ffff:$2" /sys/class/infiniband/$1/ports/1/gids/*; }
for i in $(seq 100); do has_gid rxe0 0a4e:0001 && has_gid rxe1 0a4e:0002 && break; sleep 0.1; done
has_gid rxe0 0a4e:0001 && ok "rxe0 has a GID for 10.78.0.1 beside 10.77.0.1" || fatal "no GID for 10.78.0.1"

printf 'collectors:\n  prober:\n    listen_address: "10.77.0.1:9662"\n    peers:\n      - {address: 10.78.0.2, name: b, tcp_port: 9662}\n' >"$WORK/a.yml"
printf 'collectors:\n  prober:\n    listen_address: "10.78.0.2:9662"\n' >"$WORK/b.yml"  # B probes nobody
start_b
start_a
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: peer b never up"

section "RoCE v2 packets on veth0 by source (3 s capture)"
/usr/bin/python3 "$(dirname "$0")/roce_capture.py" veth0 3 >"$WORK/cap" || fatal "capture failed"
sed 's/^/    /' "$WORK/cap"
from() { awk -v s="$1" '$1 == s { n += $4 } END { print n + 0 }' "$WORK/cap"; }
n=$(from 10.78.0.1); num_ge "$n" 10 && ok "A sends from 10.78.0.1: $n packets" || bad "A: $n packets from 10.78.0.1"
n=$(from 10.77.0.1); num_eq "$n" 0 && ok "A sends nothing from 10.77.0.1" || bad "A: $n packets from 10.77.0.1"
finish
