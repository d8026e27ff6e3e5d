#!/bin/bash
# vm test of PCIe health and the topology walk on a real kernel's PCI tree, one guest boot
# (vm-run.sh --pcie): QEMU's q35 root port 00:10.0 (slot able to do 8 GT/s x4) -> switch upstream
# port -> switch downstream port -> e1000e (eth0), and rxe2 bound to eth0. What the exporter reports
# for rxe2 (real /sys) is compared with the guest kernel's own files:
#   - the chain from the function up to the root port, current/max speed and width per hop, the
#     bottleneck hop and the path bandwidth, NUMA node, no degraded link (QEMU 7.2's switch ports and
#     e1000e are Gen1 x1: every link trains at what its weaker end supports, while the root port
#     runs below its own maximum);
#   - AER: correctable and non-fatal errors injected into 0000:03:00.0 with the kernel's aer_inject
#     (the kernel's AER driver handles them as it would real ones) move the kernel's own
#     aer_dev_correctable / aer_dev_nonfatal, and the exporter reports them exact on rxe2 hop 0;
#   - the topology collector's walk: no accelerator, no relation series, zero errors;
#   - ethtool netlink against e1000e: FEC and module EEPROM are "not supported" -> capability 0,
#     never an error;
#   - /dev/kmsg lines a process writes naming eth0 and 0000:03:00.0 count nothing on rxe2 (the
#     opt-in kmsg reader counts only the kernel's own driver records).
# Runs inside the test guest; see tests/vm/README.md.
source "$(dirname "$0")/common.sh"

section "the guest's PCIe tree"
[[ -e /sys/class/net/eth0/device ]] || fatal "no eth0 with a PCI function: run with vm-run.sh --pcie"
fn_dir=$(readlink -f /sys/class/net/eth0/device)
# /sys/devices/pci0000:00/0000:00:10.0/0000:01:00.0/0000:02:00.0/0000:03:00.0 -> hop 0 = 03:00.0
IFS=/ read -r -a parts <<<"${fn_dir#/sys/devices/}"
HOST_BRIDGE=${parts[0]}
CHAIN=()
for ((i = ${#parts[@]} - 1; i >= 1; i--)); do CHAIN+=("${parts[$i]}"); done
if [[ "$HOST_BRIDGE" == pci0000:00 && "${CHAIN[*]}" == "0000:03:00.0 0000:02:00.0 0000:01:00.0 0000:00:10.0" ]]; then
  ok "eth0 is 0000:03:00.0 behind the switch (02:00.0, 01:00.0) and root port 00:10.0"
else
  bad "unexpected PCI path of eth0: $fn_dir"
fi

ip link set eth0 up || fatal "ip link set eth0 up"
rdma link add rxe2 type rxe netdev eth0 || fatal "rdma link add rxe2 netdev eth0"
[[ -e /sys/class/infiniband/rxe2 ]] && ok "rxe2 on eth0" || bad "no rxe2"

# The kernel's answers the exporter must turn into state.
if ethtool --show-fec eth0 >/dev/null 2>&1; then bad "ethtool --show-fec eth0 succeeded: e1000e has no FEC"
else ok "ethtool --show-fec eth0 fails (not supported)"; fi
if ethtool -m eth0 >/dev/null 2>&1; then bad "ethtool -m eth0 succeeded: e1000e has no module EEPROM"
else ok "ethtool -m eth0 fails (not supported)"; fi

# The topology collector reads link and AER files in the background: every 50 ms here, so that
# the AER section below can wait for a reading begun after its injections (scrape_reading_after).
start_exporter --collector.nic_health.kmsg --collector.topology.health-interval=50ms
M=$WORK/metrics
# scrape_reading_after FILE: scrapes until the topology collector serves a reading begun after
# this call: the count of readings seen now plus two (the next may have begun before: it was in
# flight). 600 tries of at most 50 ms: a guard, never the expected path.
scrape_reading_after() {
  local now i
  scrape "$1"; get "$1" rdma_topology_refreshes_total || return 1; now=$REPLY
  for i in $(seq 600); do
    scrape "$1"; get "$1" rdma_topology_refreshes_total || return 1
    ((REPLY >= now + 2)) && return 0
    sleep 0.05
  done
  bad "no topology reading after $now + 2 (rdma_topology_refreshes_total $REPLY)"
}
scrape "$M"
scrape "$M"  # errors are counted per cause: a second scrape shows there are none

section "rxe2's PCI function and path"
expect_value "$M" 1 rdma_pci_function_info device=rxe2 pci_function=0000:03:00.0 pci_id=8086:10d3 class=0x020000 host_bridge="$HOST_BRIDGE" numa_node=-1
readf numa "$fn_dir/numa_node"
expect_value "$M" "$numa" rdma_pci_numa_node device=rxe2
expect_value "$M" "${#CHAIN[@]}" rdma_pci_path_hops device=rxe2
for d in rxe0 rxe1; do expect_absent "$M" rdma_pci_path_hops device="$d"; done  # veth: no PCI function

# Builtins only (every fork costs under TCG). speed_value "2.5 GT/s PCIe": REPLY=2500000000 (the
# exporter's transfers per second), empty for "Unknown". aer_count FILE NAME: REPLY = the count on
# the line "NAME <count>" of an aer_dev_* file.
speed_value() {
  local s=${1%% GT/s*}
  REPLY=
  [[ "$s" =~ ^([0-9]+)(\.([0-9]))?$ ]] && REPLY=$(( (BASH_REMATCH[1] * 10 + ${BASH_REMATCH[3]:-0}) * 100000000 ))
  return 0
}
aer_count() {
  local k v
  REPLY=
  while read -r k v; do [[ "$k" == "$2" ]] && { REPLY=$v; return 0; }; done <"$1"
  return 1
}
for h in "${!CHAIN[@]}"; do
  f=${CHAIN[$h]} d=/sys/bus/pci/devices/${CHAIN[$h]}
  L=(device=rxe2 pci_function="$f" hop="$h")
  readf cs "$d/current_link_speed"; readf ms "$d/max_link_speed"
  readf cw "$d/current_link_width"; readf mw "$d/max_link_width"
  echo "  hop $h $f: current $cs x$cw, max $ms x$mw"
  speed_value "$cs"; if [[ -n "$REPLY" ]]; then expect_value "$M" "$REPLY" rdma_pci_link_current_speed_transfers_per_second "${L[@]}"
  else expect_absent "$M" rdma_pci_link_current_speed_transfers_per_second "${L[@]}"; fi
  speed_value "$ms"; if [[ -n "$REPLY" ]]; then expect_value "$M" "$REPLY" rdma_pci_link_max_speed_transfers_per_second "${L[@]}"
  else expect_absent "$M" rdma_pci_link_max_speed_transfers_per_second "${L[@]}"; fi
  expect_value "$M" "$cw" rdma_pci_link_current_width_lanes "${L[@]}"
  expect_value "$M" "$mw" rdma_pci_link_max_width_lanes "${L[@]}"
  expect_value "$M" 0 rdma_pci_link_degraded "${L[@]}"
  # every link is 2.5 GT/s x1: the bottleneck is the nearest to the device, named by its slot (hop 1)
  expect_value "$M" $((h == 1)) rdma_pci_link_bottleneck "${L[@]}"
  for s in correctable:TOTAL_ERR_COR nonfatal:TOTAL_ERR_NONFATAL fatal:TOTAL_ERR_FATAL; do
    aer_count "$d/aer_dev_${s%%:*}" "${s#*:}" || bad "no ${s#*:} in $d/aer_dev_${s%%:*}"
    expect_value "$M" "$REPLY" rdma_pci_aer_reports_total "${L[@]}" aer_severity="${s%%:*}"
  done
done
# the root port's slot can do more than the link runs at (the Gen5 slot / Gen4 NIC case: no alert)
rp=${CHAIN[3]}
expect_value "$M" 2500000000 rdma_pci_link_current_speed_transfers_per_second device=rxe2 pci_function="$rp" hop=3
expect_value "$M" 8000000000 rdma_pci_link_max_speed_transfers_per_second device=rxe2 pci_function="$rp" hop=3
expect_value "$M" 4 rdma_pci_link_max_width_lanes device=rxe2 pci_function="$rp" hop=3
# 2.5 GT/s x1 after 8b/10b: 250 MB/s
expect_value "$M" 250000000 rdma_pci_path_bandwidth_bytes_per_second device=rxe2

section "topology walk: no accelerator, nothing errors"
expect_value "$M" 0 rdma_topology_gpus
expect_absent "$M" rdma_topology_relation
expect_absent "$M" rdma_topology_nic_closest_gpu
expect_value "$M" 1 rdma_exporter_collector_success collector=topology
expect_absent "$M" rdma_exporter_collector_errors_total collector=topology

section "ethtool netlink on e1000e: FEC and module EEPROM are state"
expect_value "$M" 0 rdma_exporter_collector_capability collector=netdev capability=ethtool_fec
expect_absent "$M" rdma_netdev_fec_corrected_blocks_total device=rxe2
expect_value "$M" 0 rdma_exporter_collector_capability collector=nic_health capability=module_eeprom
expect_absent "$M" rdma_transceiver_present device=rxe2
for c in netdev nic_health; do
  expect_value "$M" 1 rdma_exporter_collector_success collector="$c"
  expect_absent "$M" rdma_exporter_collector_errors_total collector="$c"
done

section "AER: errors injected into 0000:03:00.0 (aer_inject) move the kernel's counters and the exporter's"
AER=/sys/bus/pci/devices/0000:03:00.0
aer_count "$AER/aer_dev_correctable" TOTAL_ERR_COR; cor0=$REPLY
aer_count "$AER/aer_dev_nonfatal" TOTAL_ERR_NONFATAL; nf0=$REPLY
# struct aer_error_inj (drivers/pci/pcie/aer_inject.c): u8 bus, dev, fn; u32 uncor_status,
# cor_status, header_log0..3, domain. Each injection waits (bounded) for the kernel's AER handler.
python3 - "$AER" <<'EOF' || bad "aer_inject failed"
import os, struct, sys, time
dev = sys.argv[1]
def total(sev, key):
    for line in open(f"{dev}/aer_dev_{sev}"):
        if line.startswith(key):
            return int(line.split()[1])
def inject(uncor, cor, sev, key):
    before = total(sev, key)
    fd = os.open("/dev/aer_inject", os.O_WRONLY)
    os.write(fd, struct.pack("<BBBxIIIIIII", 3, 0, 0, uncor, cor, 0, 0, 0, 0, 0))
    os.close(fd)
    for _ in range(100):
        if total(sev, key) > before:
            return
        time.sleep(0.1)
    sys.exit(f"aer_dev_{sev} {key} did not move after an injection")
for _ in range(3):
    inject(0, 1 << 0, "correctable", "TOTAL_ERR_COR")        # Receiver Error (RxErr)
inject(1 << 20, 0, "nonfatal", "TOTAL_ERR_NONFATAL")         # Unsupported Request (UnsupReq)
EOF
aer_count "$AER/aer_dev_correctable" TOTAL_ERR_COR; cor1=$REPLY
aer_count "$AER/aer_dev_nonfatal" TOTAL_ERR_NONFATAL; nf1=$REPLY
aer_count "$AER/aer_dev_correctable" RxErr; rx=$REPLY
aer_count "$AER/aer_dev_nonfatal" UnsupReq; ur=$REPLY
((rx == 3 && ur == 1)) && ok "kernel: RxErr $rx, UnsupReq $ur" || bad "kernel: RxErr $rx, UnsupReq $ur (expected 3, 1)"
((cor1 == cor0 + 3)) && ok "kernel: TOTAL_ERR_COR $cor0 -> $cor1" || bad "kernel: TOTAL_ERR_COR $cor0 -> $cor1, expected +3"
((nf1 == nf0 + 1)) && ok "kernel: TOTAL_ERR_NONFATAL $nf0 -> $nf1" || bad "kernel: TOTAL_ERR_NONFATAL $nf0 -> $nf1, expected +1"
scrape_reading_after "$M"
L=(device=rxe2 pci_function=0000:03:00.0 hop=0)
expect_value "$M" "$cor1" rdma_pci_aer_reports_total "${L[@]}" aer_severity=correctable
expect_value "$M" "$nf1" rdma_pci_aer_reports_total "${L[@]}" aer_severity=nonfatal
expect_value "$M" 0 rdma_pci_aer_reports_total "${L[@]}" aer_severity=fatal
expect_value "$M" "$rx" rdma_pci_aer_errors_total "${L[@]}" aer_severity=correctable type=RxErr
expect_value "$M" "$ur" rdma_pci_aer_errors_total "${L[@]}" aer_severity=nonfatal type=UnsupReq
expect_value "$M" 0 rdma_pci_aer_errors_total "${L[@]}" aer_severity=correctable type=BadTLP
# the bridges above reported nothing themselves
for h in 1 2 3; do
  expect_value "$M" 0 rdma_pci_aer_reports_total device=rxe2 pci_function="${CHAIN[$h]}" hop="$h" aer_severity=correctable
done
expect_absent "$M" rdma_exporter_collector_errors_total collector=topology

section "kernel log: lines a process writes naming eth0 and 0000:03:00.0 count nothing on rxe2"
# Only the kernel's own driver records count (facility 0, the driver's device prefix, its DEVICE=
# line): these echoes are LOG_USER records, as a tenant's forgery would be. The recorded fixtures
# (tests/nic_health) cover real driver lines and their device mapping.
scrape "$M"
get "$M" rdma_kmsg_records_total || fatal "no rdma_kmsg_records_total"
seen=$REPLY
echo "NETDEV WATCHDOG: eth0 (e1000e): transmit queue 0 timed out 5120 ms" >/dev/kmsg
echo "NETDEV WATCHDOG: eth0 (e1000e): transmit queue 0 timed out 5120 ms" >/dev/kmsg
echo "e1000e 0000:03:00.0 eth0: Detected insufficient power on the PCIe slot (27W)." >/dev/kmsg
for ((i = 0; i < 50; i++)); do  # the reader polls every 200 ms: until it has read the three
  scrape "$M"
  get "$M" rdma_kmsg_records_total && ((${REPLY%.*} >= ${seen%.*} + 3)) && break
  sleep 0.2
done
get "$M" rdma_kmsg_records_total && ((${REPLY%.*} >= ${seen%.*} + 3)) && ok "the reader read the 3 records" || bad "the reader did not read the 3 records ($REPLY, before $seen)"
expect_absent "$M" rdma_kmsg_faults_total fault=netdev_watchdog device=rxe2
expect_absent "$M" rdma_kmsg_faults_total fault=insufficient_power device=rxe2
expect_value "$M" 0 rdma_kmsg_faults_total fault=cmd_timeout device=
expect_value "$M" 1 rdma_exporter_collector_capability collector=nic_health capability=kmsg
expect_absent "$M" rdma_exporter_collector_errors_total collector=nic_health

finish
