#!/bin/bash
# vm test: link events on the real kernel path. rxe0 rides veth0, rxe1 veth1; `ip link set veth1
# down` takes both ends of the wire down (veth0 loses its carrier), `up` brings them back. The
# daemon's verbs device-event owner must count the rxe ports' PORT_ERR/PORT_ACTIVE async events
# and time their state changes, the netdev collector's carrier counters must equal the kernel's
# class/net/<if>/carrier_*_count exactly (+1 down and +1 up on veth0), ethtool netlink link state
# must follow the carrier, and veth's answer to FEC_GET (EOPNOTSUPP) must be a capability at 0,
# never an error. Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

start_exporter
# event VALUE of FILE for rxe port 1
ev() { value "$1" rdma_port_async_events_total device="$2" port=1 event="$3"; }
carrier() { local v; readf v "/sys/class/net/$1/carrier_$2_count" && printf '%s\n' "$v"; }
# wait_events DEV EVENT MIN: scrape (bounded, 10 s) until the exporter counts at least MIN
wait_events() {
  local i n
  for i in $(seq 50); do
    scrape "$WORK/w"
    n=$(ev "$WORK/w" "$1" "$2" 2>/dev/null)
    [[ -n "$n" ]] && num_ge "$n" "$3" && return 0
    sleep 0.2
  done
  return 1
}

section "before: ports ACTIVE, events written as zeros, carrier counters = the kernel's"
scrape "$WORK/before"
declare -A ERR0 ACT0 CHG0
for dev in rxe0 rxe1; do
  ERR0[$dev]=$(ev "$WORK/before" $dev port_err) || bad "no port_err series for $dev"
  ACT0[$dev]=$(ev "$WORK/before" $dev port_active) || bad "no port_active series for $dev"
  CHG0[$dev]=$(value "$WORK/before" rdma_port_state_changes_total device=$dev port=1) || bad "no state changes for $dev"
  expect_value "$WORK/before" 0 rdma_port_async_events_total device=$dev port=1 event=pkey_change
done
DOWN0=$(carrier veth0 down)
UP0=$(carrier veth0 up)
expect_value "$WORK/before" "$DOWN0" rdma_netdev_carrier_down_total device=rxe0 port=1 netdev=veth0
expect_value "$WORK/before" "$UP0" rdma_netdev_carrier_up_total device=rxe0 port=1 netdev=veth0
expect_value "$WORK/before" 1 rdma_netdev_link_up device=rxe0 port=1 netdev=veth0

section "ip link set veth1 down"
ip link set veth1 down || fatal "ip link set veth1 down failed"
for dev in rxe1 rxe0; do wait_port_state $dev DOWN || bad "kernel: $dev/1 did not go DOWN"; done
for dev in rxe0 rxe1; do
  wait_events $dev port_err $((ERR0[$dev] + 1)) && ok "$dev: PORT_ERR counted (was ${ERR0[$dev]})" ||
    bad "$dev: no PORT_ERR counted (was ${ERR0[$dev]})"
done
scrape "$WORK/down"
for dev in rxe0 rxe1; do
  expect_value "$WORK/down" $((CHG0[$dev] + 1)) rdma_port_state_changes_total device=$dev port=1
  ts=$(value "$WORK/down" rdma_port_state_change_timestamp_seconds device=$dev port=1)
  now=$(date +%s)
  if [[ -n "$ts" ]] && num_ge "$ts" $((now - 60)) && num_ge $((now + 1)) "${ts%%.*}"; then ok "$dev: last change at $ts (now $now)"
  else bad "$dev: last change timestamp '$ts', now $now"; fi
done
expect_value "$WORK/down" $((DOWN0 + 1)) rdma_netdev_carrier_down_total device=rxe0 port=1 netdev=veth0
expect_value "$WORK/down" "$(carrier veth0 down)" rdma_netdev_carrier_down_total device=rxe0 port=1 netdev=veth0
expect_value "$WORK/down" 0 rdma_netdev_link_up device=rxe0 port=1 netdev=veth0
sleep 1  # time not ACTIVE grows while down

section "ip link set veth1 up"
ip link set veth1 up || fatal "ip link set veth1 up failed"
for dev in rxe1 rxe0; do wait_port_state $dev ACTIVE || bad "kernel: $dev/1 did not come back ACTIVE"; done
for dev in rxe0 rxe1; do
  wait_events $dev port_active $((ACT0[$dev] + 1)) && ok "$dev: PORT_ACTIVE counted (was ${ACT0[$dev]})" ||
    bad "$dev: no PORT_ACTIVE counted (was ${ACT0[$dev]})"
done
for i in $(seq 50); do  # the carrier comes back through linkwatch, asynchronously
  [[ "$(carrier veth0 up)" == $((UP0 + 1)) ]] && break
  sleep 0.1
done
scrape "$WORK/up"
for dev in rxe0 rxe1; do
  expect_value "$WORK/up" $((CHG0[$dev] + 2)) rdma_port_state_changes_total device=$dev port=1
  # What the kernel sent, exactly: one PORT_ERR per port; rxe0 one PORT_ACTIVE, rxe1 (whose
  # netdev was the one set down) one for NETDEV_UP and, on 6.1, one more for the NETDEV_CHANGE
  # of its carrier coming back (rxe_notify calls rxe_port_up for both). State changes above
  # count each transition once.
  expect_value "$WORK/up" $((ERR0[$dev] + 1)) rdma_port_async_events_total device=$dev port=1 event=port_err
  act=$(ev "$WORK/up" $dev port_active)
  if [[ $dev == rxe0 ]]; then expect_value "$WORK/up" $((ACT0[$dev] + 1)) rdma_port_async_events_total device=$dev port=1 event=port_active
  elif [[ -n "$act" ]] && num_ge "$act" $((ACT0[$dev] + 1)) && num_ge $((ACT0[$dev] + 2)) "$act"; then ok "$dev: PORT_ACTIVE $act (was ${ACT0[$dev]})"
  else bad "$dev: PORT_ACTIVE '$act', expected ${ACT0[$dev]} + 1 or 2"; fi
  na=$(value "$WORK/up" rdma_port_not_active_seconds_total device=$dev port=1)
  if [[ -n "$na" ]] && num_ge "$na" 1; then ok "$dev: not ACTIVE for $na s"; else bad "$dev: not ACTIVE seconds '$na', expected >= 1"; fi
done
expect_value "$WORK/up" $((UP0 + 1)) rdma_netdev_carrier_up_total device=rxe0 port=1 netdev=veth0
expect_value "$WORK/up" "$(carrier veth0 up)" rdma_netdev_carrier_up_total device=rxe0 port=1 netdev=veth0
expect_value "$WORK/up" 1 rdma_netdev_link_up device=rxe0 port=1 netdev=veth0

section "veth has no FEC: state, not an error"
expect_value "$WORK/up" 0 rdma_exporter_collector_capability collector=netdev capability=ethtool_fec
expect_value "$WORK/up" 1 rdma_exporter_collector_capability collector=netdev capability=ethtool_linkstate
expect_value "$WORK/up" 1 rdma_exporter_collector_capability collector=port capability=async_events
expect_absent "$WORK/up" rdma_netdev_fec_corrected_blocks_total
expect_absent "$WORK/up" rdma_exporter_collector_errors_total collector=netdev
expect_absent "$WORK/up" rdma_exporter_collector_errors_total collector=port

finish
