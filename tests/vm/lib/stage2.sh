#!/bin/bash
# Stage 2 of the rdma_exporter test guest.  Runs with the host's own userland
# (chroot into the read-only 9p host root; /tmp, /run, /var/tmp are tmpfs, the
# build tree is mounted read-write at its host path).  vm-run.sh copies this
# file into the per-run control dir, which the guest sees as /run/vm.
#
# It builds the Soft-RoCE lab, all of it inside the guest (the guest has no
# network device that leads out of the VM):
#   veth0 10.77.0.1/24 <-> veth1 10.77.0.2/24, rxe0 on veth0, rxe1 on veth1
# then runs /run/vm/cmd.sh (mode run) or an interactive bash (mode shell).
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8

say() { echo "[vm-guest] $*"; }
uptime_s() { local u; read -r u _ </proc/uptime; echo "$u"; }
phase() { [[ "${VM_VERBOSE:-0}" == 1 ]] && say "$* at uptime $(uptime_s)s"; return 0; }
phase "stage 2 started"
fail_setup() {
  say "lab setup failed: $*"
  ip -br link 2>&1 || true
  rdma link show 2>&1 || true
  dmesg | grep -iE 'rxe|rdma|infiniband|veth' | tail -20 || true
  exit 125
}

# rxe sends with its netdev as the output device, so a packet from rxe0 to
# rxe1's address (a local address) leaves through veth0 and comes back in on
# veth1; veth1 must accept a packet whose source is a local address.
for k in all default; do
  echo 0 > /proc/sys/net/ipv4/conf/$k/rp_filter
  echo 1 > /proc/sys/net/ipv4/conf/$k/accept_local
done
ip link set lo up || fail_setup "lo"
ip link add veth0 type veth peer name veth1 || fail_setup "veth pair"
for i in veth0 veth1; do
  echo 0 > /proc/sys/net/ipv4/conf/$i/rp_filter
  echo 1 > /proc/sys/net/ipv4/conf/$i/accept_local
done
ip addr add 10.77.0.1/24 dev veth0 && ip addr add 10.77.0.2/24 dev veth1 || fail_setup "addresses"
ip link set veth0 up && ip link set veth1 up || fail_setup "link up"
# Add rxe only once both ends are up: a carrier change after 'rdma link add'
# counts as a port down in hw_counters/link_downed, and the tests expect 0.
phase "veth pair up"
rdma link add rxe0 type rxe netdev veth0 || fail_setup "rdma link add rxe0"
rdma link add rxe1 type rxe netdev veth1 || fail_setup "rdma link add rxe1"

phase "rxe0 and rxe1 added"
# Ready = both ports ACTIVE and the IPv4-mapped RoCE v2 GID (::ffff:10.77.0.x)
# populated.  Bounded by iterations, not by a clock.
ready=0
for _ in $(seq 100); do
  ok=1
  for d in rxe0 rxe1; do
    p=/sys/class/infiniband/$d/ports/1
    grep -q ACTIVE "$p/state" 2>/dev/null || ok=0
    grep -qs ':ffff:0a4d:' "$p"/gids/* || ok=0
  done
  if [ $ok = 1 ]; then ready=1; break; fi
  sleep 0.1
done
[ $ready = 1 ] || fail_setup "rxe0/rxe1 not ACTIVE with an IPv4 GID"
say "rxe0 (veth0 10.77.0.1) and rxe1 (veth1 10.77.0.2) ACTIVE at uptime $(uptime_s)s"

# variables and working dir from the host side
# shellcheck disable=SC1091
[ -f /run/vm/env.sh ] && . /run/vm/env.sh
cd "${VM_CWD:-/}" 2>/dev/null || cd /

case "${VM_MODE:-run}" in
  shell)
    # a controlling terminal on the serial line, so that job control and ^C work
    [ -n "${VM_STTY:-}" ] && stty $VM_STTY </dev/ttyS0 2>/dev/null
    if [ -s /run/vm/cmd.sh ]; then bash /run/vm/cmd.sh </dev/ttyS0 >/dev/ttyS0 2>&1; fi
    say "shell in the guest (host root read-only, build tree read-write); 'exit' powers off"
    setsid -c bash -i </dev/ttyS0 >/dev/ttyS0 2>&1
    ;;
  *)
    : > /run/vm/started   # vm-run.sh: the boot reached the command (else it boots again, once)
    say "running command at uptime $(uptime_s)s"
    bash /run/vm/cmd.sh </dev/null
    ;;
esac
