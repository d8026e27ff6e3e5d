#!/bin/bash
# vm test of the nic_health collector, one guest boot for every kernel path it has here: the
# guest kernel's own ethtool netlink answer to ETHTOOL_MSG_MODULE_EEPROM_GET on rxe's veth
# netdevs (EOPNOTSUPP: no module EEPROM) is state, never an error; the devlink family answers an
# empty health reporter dump (rxe has no PCI function, the guest no devlink instance): state; and
# the kernel-log reader counts fault lines written to the real /dev/kmsg, by pattern, with the
# device only where the line names one the host model knows.
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

# What the kernel itself answers (the exporter must read the same): no module EEPROM on veth.
if ethtool -m veth0 >/dev/null 2>&1; then bad "ethtool -m veth0 succeeded: veth has no module EEPROM"
else ok "ethtool -m veth0 fails as expected (no module EEPROM)"; fi

start_exporter --collector.nic_health.kmsg
M=$WORK/metrics
scrape "$M"
scrape "$M"  # errors would be counted per cause: a second scrape shows there are none

section "module EEPROM and devlink: what veth and rxe lack is state"
expect_value "$M" 1 rdma_exporter_collector_success collector=nic_health
expect_absent "$M" rdma_exporter_collector_errors_total collector=nic_health
expect_value "$M" 0 rdma_exporter_collector_capability collector=nic_health capability=module_eeprom
expect_value "$M" 1 rdma_exporter_collector_capability collector=nic_health capability=devlink
expect_absent "$M" rdma_transceiver_present
expect_absent "$M" rdma_devlink_health_reporter_healthy
expect_value "$M" 1 rdma_exporter_collector_capability collector=nic_health capability=kmsg

section "kernel log: lines written to /dev/kmsg are counted"
echo "mlx5_core 0000:08:00.0: wait_func:1127:(pid 1234): ACCESS_REG(0x805) timeout. Will cause a leak" >/dev/kmsg
echo "NETDEV WATCHDOG: veth0 (veth): transmit queue 0 timed out 5120 ms" >/dev/kmsg
echo "NETDEV WATCHDOG: veth1 (veth): transmit queue 0 timed out 5120 ms" >/dev/kmsg
echo "mlx5_core 0000:08:00.0: E-Switch: an unrelated line" >/dev/kmsg
for _ in $(seq 50); do  # the reader polls every 200 ms
  scrape "$M"
  grep -q '^rdma_kmsg_faults_total{fault="netdev_watchdog",device="rxe1"}' "$M" && break
  sleep 0.2
done
expect_value "$M" 1 rdma_kmsg_faults_total fault=cmd_timeout device=
expect_value "$M" 1 rdma_kmsg_faults_total fault=netdev_watchdog device=rxe0
expect_value "$M" 1 rdma_kmsg_faults_total fault=netdev_watchdog device=rxe1
expect_value "$M" 0 rdma_kmsg_faults_total fault=health_poll_failed device=
expect_absent "$M" rdma_exporter_collector_errors_total collector=nic_health

finish
