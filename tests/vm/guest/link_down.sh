#!/bin/bash
# vm test: a link goes down and comes back.  `ip link set veth1 down` takes
# both ends of the veth wire down: rxe1 (admin down: phys_state Disabled) and
# rxe0 (carrier lost: phys_state Polling) both go to state DOWN (1), and each
# counts one link_downed in ports/1/hw_counters.  After `ip link set veth1 up`
# both are ACTIVE (4) again.  The exporter must show every step; when the
# binary has the hw_counters collector, its link_downed must move too.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

HW=$(hw_collector_name)
if [[ -n "$HW" ]]; then
  start_exporter "--collector.$HW"
else
  echo "(this exporter has no hw_counters collector: link_downed is checked in sysfs only)"
  start_exporter
fi

declare -A DOWNED0
settle_hw_counters rxe0 rxe1
scrape "$WORK/before"
section "before: both ports ACTIVE"
for dev in rxe0 rxe1; do
  readf "DOWNED0[$dev]" "/sys/class/infiniband/$dev/ports/1/hw_counters/link_downed"
  expect_value "$WORK/before" 4 rdma_port_state device=$dev port=1
  if [[ -n "$HW" ]]; then
    expect_value "$WORK/before" "${DOWNED0[$dev]}" "$HW_METRIC" device=$dev port=1 "$HW_LABEL=link_downed"
  fi
done

section "ip link set veth1 down"
ip link set veth1 down || fatal "ip link set veth1 down failed"
for dev in rxe1 rxe0; do
  wait_port_state $dev DOWN || bad "kernel: $dev/1 did not go DOWN"
done
settle_hw_counters rxe0 rxe1
scrape "$WORK/down"
for dev in rxe0 rxe1; do
  echo "  sysfs $dev: state='$(sysfs_port $dev state)' phys_state='$(sysfs_port $dev phys_state)' link_downed=$(hw_sysfs $dev link_downed)"
  expect_value "$WORK/down" 1 rdma_port_state device=$dev port=1
  # the exporter's physical state is the kernel's number
  expect_value "$WORK/down" "$(sysfs_port $dev phys_state | cut -d: -f1)" rdma_port_physical_state device=$dev port=1
done
# veth1 itself is administratively down: Disabled (3)
expect_value "$WORK/down" 3 rdma_port_physical_state device=rxe1 port=1
# the port info stays while the link is down
expect_value "$WORK/down" 1 rdma_port_info device=rxe1 port=1 link_layer=Ethernet

section "ip link set veth1 up"
ip link set veth1 up || fatal "ip link set veth1 up failed"
for dev in rxe1 rxe0; do
  wait_port_state $dev ACTIVE || bad "kernel: $dev/1 did not come back ACTIVE"
done
settle_hw_counters rxe0 rxe1
scrape "$WORK/up"
for dev in rxe0 rxe1; do
  expect_value "$WORK/up" 4 rdma_port_state device=$dev port=1
  expect_value "$WORK/up" 5 rdma_port_physical_state device=$dev port=1
done

section "link_downed moved"
for dev in rxe0 rxe1; do
  readf now "/sys/class/infiniband/$dev/ports/1/hw_counters/link_downed"
  if ((now >= DOWNED0[$dev] + 1)); then
    ok "kernel: $dev hw_counters/link_downed ${DOWNED0[$dev]} -> $now"
  else
    bad "kernel: $dev hw_counters/link_downed ${DOWNED0[$dev]} -> $now, expected at least +1"
  fi
  if [[ -n "$HW" ]]; then
    if hw_get "$WORK/up" $dev link_downed; then
      got=$REPLY
      if num_ge "$got" $((DOWNED0[$dev] + 1)) && num_eq "$got" "$now"; then
        ok "exporter: $dev link_downed = $got (was ${DOWNED0[$dev]})"
      else
        bad "exporter: $dev link_downed = $got; kernel says $now, was ${DOWNED0[$dev]}"
      fi
    else
      bad "exporter: no $HW_METRIC{device=\"$dev\",port=\"1\",$HW_LABEL=\"link_downed\"}"
    fi
  fi
done

finish
