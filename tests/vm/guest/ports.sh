#!/bin/bash
# vm test: the exporter sees the guest's two Soft-RoCE devices as the kernel
# does: rxe0 on veth0 and rxe1 on veth1, link layer Ethernet, ACTIVE/LinkUp,
# driver rxe, the node GUIDs that ibv_devices reports, no PMA counters/.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

start_exporter
M=$WORK/metrics
scrape "$M"

section "exporter self-metrics"
expect_value "$M" 2 rdma_exporter_devices
expect_value "$M" 1 rdma_exporter_collector_success collector=port
expect_absent "$M" rdma_exporter_collector_errors_total collector=port

declare -A NETDEV=([rxe0]=veth0 [rxe1]=veth1)
declare -A OTHER=([rxe0]=veth1 [rxe1]=veth0)
for dev in rxe0 rxe1; do
  nd=${NETDEV[$dev]}
  section "$dev (expected on $nd)"
  # the kernel's view, for the log
  echo "  sysfs: state='$(sysfs_port $dev state)' phys_state='$(sysfs_port $dev phys_state)'" \
       "link_layer='$(sysfs_port $dev link_layer)' rate='$(sysfs_port $dev rate)'"

  expect_value "$M" 1 rdma_port_info device=$dev port=1 link_layer=Ethernet
  expect_value "$M" 4 rdma_port_state device=$dev port=1
  expect_value "$M" 5 rdma_port_physical_state device=$dev port=1
  expect_value "$M" 1 rdma_device_info device=$dev driver=rxe node_type=CA

  # the netdev behind the port: the right veth, never the other one
  _lookup "$M" rdma_port_netdev_info device=$dev port=1 netdev=$nd
  if ((${#_FOUND[@]} > 0)); then
    ok "rdma_port_netdev_info device=$dev port=1 netdev=$nd (${#_FOUND[@]} series)"
  else
    bad "no rdma_port_netdev_info device=$dev port=1 netdev=$nd"
  fi
  expect_absent "$M" rdma_port_netdev_info device=$dev netdev=${OTHER[$dev]}

  # node GUID: ibv_devices prints it as 16 hex digits, the exporter as 0x + 16
  guid=$(ibv_devices | awk -v d=$dev '$1 == d { print $2 }')
  if [[ -n "$guid" ]]; then
    expect_value "$M" 1 rdma_device_info device=$dev node_guid=0x$guid
  else
    bad "ibv_devices does not list $dev"
  fi

  # rate: sysfs says "10 Gb/sec (1X FDR10)" for rxe = 1.25e9 bytes/s
  gbps=$(sysfs_port $dev rate | awk '{ print $1 }')
  expect_value "$M" "$(awk -v g="$gbps" 'BEGIN { print g * 1e9 / 8 }')" rdma_port_rate_bytes_per_second device=$dev port=1

  # RoCE: no LID, and rxe has no PMA counters/ directory
  expect_value "$M" 0 rdma_port_lid device=$dev port=1
  if [[ -d /sys/class/infiniband/$dev/ports/1/counters ]]; then want=1; else want=0; fi
  expect_value "$M" $want rdma_port_pma_counters_present device=$dev port=1

  # verbs attributes, compared with ibv_devinfo (active_mtu: 1024 (3))
  mtu=$(ibv_devinfo -d $dev | awk '/active_mtu:/ { print $2 }')
  expect_value "$M" "$mtu" rdma_port_active_mtu_bytes device=$dev port=1
done

finish
