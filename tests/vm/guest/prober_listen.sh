#!/bin/bash
# vm test: the responder's default listen address (any) works on the kernel the guest booted:
# `prober_listen.sh dual` expects IPv6 and a dual-stack socket that IPv4 and IPv6 clients reach;
# `prober_listen.sh v4` expects a kernel booted with ipv6.disable=1 (no AF_INET6 sockets) and an
# IPv4 socket. In both, A (rxe0) and B (rxe1) listen on "any" and probe each other over IPv4.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/prober_pair.sh"

MODE=${1:?usage: prober_listen.sh dual|v4}
section "the guest's kernel is the kind this test is for ($MODE)"
if [[ -e /proc/net/if_inet6 ]]; then have=dual; else have=v4; fi
[[ $have == "$MODE" ]] && ok "kernel: $have" || fatal "kernel is $have, the test wants $MODE (RDMA_EXPORTER_VM_KARGS)"

# listen_config PEER_ADDR PEER_NAME LISTEN_PORT PEER_PORT: the default host (any), own port
listen_config() {
  cat <<YAML
collectors:
  prober:
    listen_address: ":$3"
    peers:
      - {address: $1, name: $2, tcp_port: $4, group: vm}
YAML
}
listen_config 10.77.0.2 b 9662 9663 >"$WORK/a.yml"
listen_config 10.77.0.1 a 9663 9662 >"$WORK/b.yml"
start_a
start_b

section "both responders listen on any address and answer over IPv4"
wait_for $PORT_A 1 rdma_prober_active && ok "A: prober active" || bad "A: prober not active"
wait_for $PORT_B 1 rdma_prober_active && ok "B: prober active" || bad "B: prober not active"
wait_for $PORT_A 1 rdma_prober_peer_up device=rxe0 port=1 peer=b && ok "A sees b up" || bad "A: peer b never up"
wait_for $PORT_B 1 rdma_prober_peer_up device=rxe1 port=1 peer=a && ok "B sees a up" || bad "B: peer a never up"

section "the listening socket's family"
# /proc/net/tcp6 (state 0A = LISTEN) holds the dual-stack socket; /proc/net/tcp an IPv4 one.
listening() { awk -v p="$(printf ':%04X' "$2")" '$2 ~ p "$" && $4 == "0A" { f = 1 } END { exit !f }' "$1" 2>/dev/null; }
if [[ $MODE == dual ]]; then
  listening /proc/net/tcp6 9662 && ok "A listens on an IPv6 socket" || bad "A: no IPv6 listening socket on 9662"
  listening /proc/net/tcp 9662 && bad "A: a separate IPv4 socket on 9662" || ok "A: no separate IPv4 socket (dual-stack)"
  (exec 3<>/dev/tcp/::1/9662) 2>/dev/null && ok "A accepts a TCP connection on ::1" || bad "A: no connection on ::1"
  (exec 3<>/dev/tcp/127.0.0.1/9662) 2>/dev/null && ok "A accepts a TCP connection on 127.0.0.1" || bad "A: none on 127.0.0.1"
else
  listening /proc/net/tcp 9662 && ok "A listens on an IPv4 socket" || bad "A: no IPv4 listening socket on 9662"
  grep -q "cannot listen" "$WORK/exporter.log" && bad "A logged a listen failure" || ok "A logged no listen failure"
fi
finish
