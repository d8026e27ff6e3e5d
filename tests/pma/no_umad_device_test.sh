#!/usr/bin/env bash
# The pma collector on a host whose InfiniBand port has no umad device node the exporter may open
# (a container without /dev/infiniband, systemd's PrivateDevices=yes, a node owned by another
# user): that is the host's state, not an error. The real libibumad reads /sys/class/infiniband
# and /sys/class/infiniband_mad, so the exporter runs in a private mount namespace (unshare -m)
# where a tmpfs over /sys/class shows one fixture HCA with an ACTIVE port and a umad0 entry:
#   * no /dev/infiniband/umad0 (ENOENT): rdma_exporter_collector_capability{collector="pma",
#     capability="umad_device"} 0, no pma error over three scrapes, one log line;
#   * a umad0 node the exporter's user may not open (EACCES, the exporter runs as nobody):
#     the same.
# Usage: no_umad_device_test.sh --exporter PATH   (root: mount namespaces)
set -uo pipefail
source "$(dirname "$0")/../lib/exporter_arg.sh"
source "$(dirname "$0")/../lib/common.sh"
HERE=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x "$EXPORTER" ]] || { echo "FATAL: $EXPORTER is not executable"; exit 2; }
if [[ $(id -u) -ne 0 ]]; then echo "FATAL: the test needs root (unshare -m, mount)"; exit 1; fi
for tool in unshare mount curl setpriv promtool python3; do
  command -v $tool >/dev/null || { echo "FATAL: $tool is not installed (scripts/install-deps.sh --test)"; exit 1; }
done
WORK=$(mktemp -d /tmp/pma-noumad.XXXXXX)
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT

python3 "$HERE/tests/lib/sysfs_gen.py" "$WORK/sys" --profile demo >/dev/null || { echo "FATAL: sysfs_gen"; exit 1; }
dev=$(readlink -f "$WORK/sys/class/infiniband/mlx5_0")
port="$dev/ports/1"
[[ $(cat "$port/state") == "4: ACTIVE" && $(cat "$port/link_layer") == InfiniBand ]] || { echo "FATAL: fixture mlx5_0/1 is not an ACTIVE IB port"; exit 1; }
# libibumad also reads the port's GID 0 and P_Key table, which every IB port has.
mkdir -p "$port/gids" "$port/pkeys"
echo "fe80:0000:0000:0000:0c42:a103:00d1:7e01" >"$port/gids/0"
echo "0xffff" >"$port/pkeys/0"
chmod -R a+rX "$WORK"

# $1: case name; $2: what to do to /dev/infiniband inside the namespace; $3...: run the exporter as
run_case() {
  local name=$1 dev_setup=$2; shift 2
  local out="$WORK/$name" listen=127.0.0.1:$((19800 + RANDOM % 150))
  mkdir -p "$out" && chmod 777 "$out"
  echo "case $name"
  # The whole scenario runs inside the namespace: mounts vanish with it.
  unshare -m bash -c '
    set -e
    mount --make-rprivate /
    mount -t tmpfs rdma-test /sys/class
    mkdir /sys/class/infiniband /sys/class/infiniband_mad /sys/class/infiniband_mad/umad0
    ln -s "'"$dev"'" /sys/class/infiniband/mlx5_0
    echo 5 >/sys/class/infiniband_mad/abi_version
    echo mlx5_0 >/sys/class/infiniband_mad/umad0/ibdev
    echo 1 >/sys/class/infiniband_mad/umad0/port
    # A /dev of our own (the host'"'"'s is shared, even its directories): the usual nodes, no umad.
    mkdir "'"$out"'/hostdev" && mount --rbind /dev "'"$out"'/hostdev"
    mount -t tmpfs rdma-test-dev /dev
    for n in null zero random urandom; do touch /dev/$n && mount --bind "'"$out"'/hostdev/$n" /dev/$n; done
    mkdir /dev/infiniband
    '"$dev_setup"'
    "$@" --path.sysfs="'"$WORK/sys"'" --collector.disable-defaults --collector.pma \
      --web.listen-address='"$listen"' >"'"$out"'/log" 2>&1 &
    pid=$!
    for i in $(seq 100); do curl -sf "http://'"$listen"'/healthz" >/dev/null && break; sleep 0.1; done
    for i in 1 2 3; do curl -sf "http://'"$listen"'/metrics" >"'"$out"'/m$i" || echo "scrape $i failed" >>"'"$out"'/log"; done
    kill $pid; wait $pid || true
  ' _ "$@"
  local m="$out/m3"
  [[ -s $m ]] || { bad "$name: no scrape (log: $(tail -5 "$out/log"))"; return; }
  expect_value "$m" 0 rdma_exporter_collector_capability collector=pma capability=umad_device
  expect_absent "$m" rdma_exporter_collector_errors_total collector=pma  # over three scrapes
  expect_value "$m" 1 rdma_exporter_collector_success collector=pma
  local n
  n=$(grep -c 'cannot open the umad device of mlx5_0/1' "$out/log")
  [[ $n -eq 1 ]] && ok "$name: logged once" || bad "$name: logged $n times: $(tail -5 "$out/log")"
  if out_p=$(promtool check metrics <"$m" 2>&1); then ok "$name: promtool check metrics"; else bad "$name: promtool: $out_p"; fi
}

run_case no_node ":" "$EXPORTER"
# A node that exists but that the exporter's user may not open: open() fails with EACCES.
# nobody runs a copy it can reach (the build may be under /root, mode 0700): tests/lib/common.sh.
STAGED=$(stage_unprivileged "$EXPORTER" "$WORK/unprivileged") || { echo "FATAL: cannot stage $EXPORTER for nobody"; exit 1; }
run_case not_allowed "touch /dev/infiniband/umad0; chmod 600 /dev/infiniband/umad0" \
  setpriv --reuid=nobody --regid=nogroup --clear-groups "$STAGED"

tally "pma no umad device"
