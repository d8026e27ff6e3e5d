#!/bin/bash
# vm test of the netdev collector: rxe0/rxe1's netdevs veth0/veth1 are found and read through
# the real SIOCETHTOOL ioctl (values equal `ethtool -S`), veth's missing pause/DCB support and
# ECN tree are capabilities the host lacks (state, not errors), and the RoCE consistency signal
# says PFC is unknown.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

start_exporter --collector.netdev.extra-stats=peer_ifindex,rx_queue_0_xdp_packets
M=$WORK/metrics
scrape "$M"
scrape "$M"  # a second scrape: errors counted once per cause, not per scrape

section "collector"
expect_value "$M" 1 rdma_exporter_collector_success collector=netdev
expect_absent "$M" rdma_exporter_collector_errors_total collector=netdev reason=netdev_missing

declare -A NETDEV=([rxe0]=veth0 [rxe1]=veth1)
for dev in rxe0 rxe1; do
  nd=${NETDEV[$dev]}
  section "$dev on $nd"
  expect_value "$M" 1 rdma_netdev_present device=$dev port=1 netdev=$nd
  expect_value "$M" 1 rdma_netdev_info device=$dev port=1 netdev=$nd driver=veth
  for s in peer_ifindex rx_queue_0_xdp_packets; do
    want=$(ethtool -S "$nd" | awk -v s="$s" -F': *' '{ gsub(/^ +/, "", $1) } $1 == s { print $2 }')
    expect_value "$M" "$want" rdma_netdev_ethtool_stat device=$dev port=1 netdev=$nd stat=$s
  done
  expect_value "$M" 0 rdma_netdev_roce_priority_consistent device=$dev port=1 priority=3 reason=pfc_unknown
done

# veth has neither ethtool-netlink pause statistics nor dcbnl nor an ecn/ tree: state, no error
expect_absent "$M" rdma_exporter_collector_errors_total collector=netdev
for cap in pause_stats dcbnl ecn_sysfs; do
  expect_value "$M" 0 rdma_exporter_collector_capability collector=netdev capability=$cap
done

finish
