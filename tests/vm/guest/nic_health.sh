#!/bin/bash
# vm test of the nic_health collector, one guest boot for every kernel path it has here: the
# guest kernel's own ethtool netlink answer to ETHTOOL_MSG_MODULE_EEPROM_GET on rxe's veth
# netdevs (EOPNOTSUPP: no module EEPROM) is state, never an error; the devlink family answers an
# empty health reporter dump (rxe has no PCI function, the guest no devlink instance): state; and
# the kernel-log reader reads the real /dev/kmsg but counts no fault from what a process can put
# there: lines written to /dev/kmsg (LOG_USER records, even root's with "<0>"), and the kernel's
# own segfault line of an unprivileged process named "NETDEV WATCHDOG".
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

section "kernel log: lines a process puts in /dev/kmsg count no fault"
get "$M" rdma_kmsg_records_total; before=$REPLY
echo "mlx5_core 0000:08:00.0: wait_func:1127:(pid 1234): ACCESS_REG(0x805) timeout. Will cause a leak" >/dev/kmsg
echo "<0>NETDEV WATCHDOG: veth0 (veth): transmit queue 0 timed out 5120 ms" >/dev/kmsg  # facility 0 asked: LOG_USER given
echo "NETDEV WATCHDOG: veth1 (virtio_net): transmit queue 0 timed out 5120 ms" >/dev/kmsg
# The kernel's own line quoting a task name: uid 65534, comm "NETDEV WATCHDOG", a NULL read.
/usr/bin/python3 -c 'import ctypes, os
ctypes.CDLL(None).prctl(15, b"NETDEV WATCHDOG", 0, 0, 0)
os.setgid(65534); os.setuid(65534)
ctypes.string_at(0)' 2>/dev/null
rc=$?
if ((rc == 139)); then ok "the unprivileged process died of SIGSEGV"; else bad "python3 exited $rc, not SIGSEGV (139)"; fi
if dmesg | grep -q 'NETDEV WATCHDOG\[[0-9]*\]: segfault'; then ok "the kernel logged its segfault line"
else bad "no segfault line in the kernel log (debug.exception-trace?)"; fi
echo "rdma_exporter vm kmsg marker" >/dev/kmsg
for _ in $(seq 50); do  # the reader polls every 200 ms; 5 records were added
  scrape "$M"
  get "$M" rdma_kmsg_records_total
  ((REPLY >= before + 5)) && break
  sleep 0.2
done
if ((REPLY >= before + 5)); then ok "the reader saw the $((REPLY - before)) new records"
else bad "the reader saw $((REPLY - before)) new records, not 5"; fi
for fault in cmd_timeout health_poll_failed fw_fatal module_high_temperature insufficient_power netdev_watchdog; do
  expect_value "$M" 0 rdma_kmsg_faults_total fault=$fault device=
done
expect_absent "$M" rdma_kmsg_faults_total device=rxe0
expect_absent "$M" rdma_kmsg_faults_total device=rxe1
expect_absent "$M" rdma_exporter_collector_errors_total collector=nic_health

finish
