#!/usr/bin/env bash
# vm-run.sh - run a command on real Soft-RoCE devices (rxe0 + rxe1) inside a
# small QEMU guest, against the host's build tree.  See tests/vm/README.md.
#
# Usage:
#   tests/vm/vm-run.sh [--build DIR] [--rw DIR]... [--shell] [--timeout S] -- CMD [ARGS...]
#   tests/vm/vm-run.sh --prepare        # install packages + build the guest image only
#
#   --build DIR   the build tree, mounted read-write at the same path in the
#                 guest, and exported there as $VM_BUILD_DIR (the guest test
#                 scripts find rdma_exporter and rdma_write_loop through it)
#   --rw DIR      any other host dir to mount read-write at its host path
#   --shell       interactive bash in the guest (after CMD, if one is given);
#                 leave with 'exit' (or Ctrl-a x, QEMU's escape)
#   --timeout S   hard limit for the whole invocation (default 240 s, or
#                 $RDMA_EXPORTER_VM_TIMEOUT); 0 = none.  --shell has no limit
#                 unless one is given.
#   --prepare     make sure everything is installed and cached, boot nothing
#   --pcie        also give the guest a PCIe tree with a NIC in it (or
#                 RDMA_EXPORTER_VM_PCIE=1): a root port (x-speed 8, x-width 4)
#                 with a PCIe switch (x3130-upstream + xio3130-downstream)
#                 behind it and an e1000e behind the switch; the guest loads
#                 e1000e and aer_inject (its netdev is eth0, no peer: nothing
#                 leaves the VM)
#
# What it does:
#   * installs what it needs from Debian with apt-get when missing (as root):
#     qemu-system-x86 busybox-static kmod cpio xz-utils rdma-core
#     ibverbs-providers ibverbs-utils perftest iproute2 strace curl;
#   * fetches Debian's kernel (the package linux-image-amd64 depends on) with
#     `apt-get download`, unpacks it with dpkg-deb -x into the cache (it is
#     never installed), keeps an uncompressed vmlinux (QEMU boots it through
#     its PVH entry, skipping ~2 s of decompression under TCG) and the few
#     modules the guest needs;
#   * builds a ~6 MB initramfs (busybox + modules + lib/init), cached per
#     kernel version and init script under $RDMA_EXPORTER_VM_CACHE
#     (default ${XDG_CACHE_HOME:-/var/tmp}/rdma_exporter-vm);
#   * boots it with QEMU (TCG; KVM is not usable on these machines), sharing
#     the host root read-only over 9p, so host-built binaries and the host's
#     tools (ip, rdma, perftest, curl, strace, ...) run unchanged in the guest;
#   * in the guest: loads rdma_rxe, creates veth0 (10.77.0.1/24) and veth1
#     (10.77.0.2/24), rxe0 on veth0 and rxe1 on veth1, waits for both ports to
#     be ACTIVE, then runs CMD with bash in the host's userland (chroot), cwd
#     = the current dir, and exits with CMD's exit code.
#
# The guest has no network device that leads out of the VM (-nic none): RDMA
# traffic between rxe0 and rxe1 crosses the guest's own veth pair only.
#
# Exit codes: CMD's own; 124 = timed out; 125 = harness/lab failure (a message
# says what is missing).  Each invocation has its own control dir and QEMU, and
# the cache is built under a lock, so concurrent invocations are safe (ctest
# still serialises them with RESOURCE_LOCK vm: the guest wants both cores).
#
# Environment:
#   RDMA_EXPORTER_VM_TIMEOUT    default hard limit in seconds (240)
#   RDMA_EXPORTER_VM_CACHE      cache dir (kernel ~70 MB + initramfs ~6 MB)
#   RDMA_EXPORTER_VM_KERNEL     a kernel ABI name (e.g. 6.1.0-57-amd64) instead
#                               of what linux-image-amd64 points at
#   RDMA_EXPORTER_VM_NO_INSTALL=1  never run apt-get install; fail instead
#   RDMA_EXPORTER_VM_SMP / _MEM guest vCPUs (2) and MiB (1024)
#   RDMA_EXPORTER_VM_PASSENV    names of host variables to export in the guest
#   RDMA_EXPORTER_VM_KARGS      extra kernel arguments (default tsc=reliable:
#                               q35 has an HPET, but the TSC is the fast clock)
#   RDMA_EXPORTER_VM_VERBOSE=1  show kernel messages and harness details
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${RDMA_EXPORTER_VM_CACHE:-${XDG_CACHE_HOME:-/var/tmp}/rdma_exporter-vm}
SMP=${RDMA_EXPORTER_VM_SMP:-2}
MEM=${RDMA_EXPORTER_VM_MEM:-1024}
VERBOSE=${RDMA_EXPORTER_VM_VERBOSE:-0}
T_START=$EPOCHREALTIME

log() { printf '[vm-run] %s\n' "$*" >&2; }
vlog() { [[ "$VERBOSE" == 1 ]] && log "$@"; return 0; }
die() { log "ERROR: $*"; exit 125; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}'; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

# ---------------------------------------------------------------- arguments
RWDIRS=() BUILD_DIR='' SHELL_MODE=0 PREPARE=0 TIMEOUT= PCIE=${RDMA_EXPORTER_VM_PCIE:-0}
while (($#)); do
  case $1 in
    --build|--rw|--build=*|--rw=*)
      if [[ "$1" == *=* ]]; then opt=${1%%=*} d=${1#*=}; shift
      else [[ $# -ge 2 ]] || die "$1 needs a directory"; opt=$1 d=$2; shift 2; fi
      [[ -d "$d" ]] || die "$opt $d: no such directory"
      d=$(cd "$d" && pwd -P)
      RWDIRS+=("$d")
      [[ "$opt" == --build ]] && BUILD_DIR=$d ;;
    --shell) SHELL_MODE=1; shift ;;
    --timeout) [[ $# -ge 2 ]] || die "--timeout needs seconds"; TIMEOUT=$2; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; shift ;;
    --prepare) PREPARE=1; shift ;;
    --pcie) PCIE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) usage >&2; die "unknown option $1" ;;
    *) break ;;
  esac
done
CMD=("$@")
if ((!PREPARE && !SHELL_MODE && ${#CMD[@]} == 0)); then
  usage >&2; die "no command given (use -- CMD..., --shell or --prepare)"
fi
if [[ -z "$TIMEOUT" ]]; then
  if ((SHELL_MODE)); then TIMEOUT=${RDMA_EXPORTER_VM_TIMEOUT:-0}; else TIMEOUT=${RDMA_EXPORTER_VM_TIMEOUT:-240}; fi
fi
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "timeout must be a whole number of seconds, got '$TIMEOUT'"
# one deadline for everything: installs, downloads and the guest
DEADLINE=$((SECONDS + TIMEOUT))
left() { if ((TIMEOUT == 0)); then echo 0; else local l=$((DEADLINE - SECONDS)); echo $((l > 1 ? l : 1)); fi; }
limited() {  # limited CMD...: run CMD under what is left of the deadline
  if ((TIMEOUT == 0)); then "$@"; return; fi
  local rc=0
  timeout -k 5 "$(left)" "$@" || rc=$?
  if ((rc == 124)); then log "ERROR: timed out (${TIMEOUT}s) in: $*"; exit 124; fi
  return $rc
}

# ---------------------------------------------------------------- host packages
# package -> a file that shows it is there
declare -A PKG_FILE=(
  [qemu-system-x86]=/usr/bin/qemu-system-x86_64
  [busybox-static]=/bin/busybox
  [kmod]=/usr/sbin/modprobe
  [cpio]=/usr/bin/cpio
  [xz-utils]=/usr/bin/xz
  [rdma-core]=/usr/sbin/rdma-ndd
  [ibverbs-providers]=/etc/libibverbs.d/rxe.driver
  [ibverbs-utils]=/usr/bin/ibv_devinfo
  [perftest]=/usr/bin/ib_write_bw
  [iproute2]=/usr/bin/rdma
  [strace]=/usr/bin/strace
  [curl]=/usr/bin/curl
)

apt_get() {
  DEBIAN_FRONTEND=noninteractive limited apt-get -o DPkg::Lock::Timeout=120 "$@"
}

ensure_packages() {
  local missing=() p
  for p in "${!PKG_FILE[@]}"; do
    [[ -e "${PKG_FILE[$p]}" ]] || missing+=("$p")
  done
  # busybox (the dynamic one) also owns /bin/busybox: insist on the static build
  if [[ -e /bin/busybox ]] && ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
    missing+=(busybox-static)
  fi
  ((${#missing[@]})) || return 0
  local list; list=$(printf '%s\n' "${missing[@]}" | sort -u | paste -sd' ')
  if [[ ! -r /etc/debian_version ]] || ! command -v apt-get >/dev/null; then
    die "missing: ${list} (this harness needs Debian 12 / bookworm packages)"
  fi
  if [[ "${RDMA_EXPORTER_VM_NO_INSTALL:-0}" == 1 ]]; then
    die "missing packages: ${list}; install them with: apt-get install --no-install-recommends ${list}"
  fi
  if ((EUID != 0)); then
    die "missing packages: ${list}; as root run: apt-get update && apt-get install --no-install-recommends ${list}"
  fi
  log "installing missing packages: ${list}"
  local t0=$EPOCHREALTIME
  # shellcheck disable=SC2086
  if ! apt_get install -y -qq --no-install-recommends $list >/dev/null 2>&1; then
    apt_get update -qq || die "apt-get update failed"
    # shellcheck disable=SC2086
    apt_get install -y -qq --no-install-recommends $list >/dev/null || die "apt-get install $list failed"
  fi
  for p in "${missing[@]}"; do
    [[ -e "${PKG_FILE[$p]}" ]] || die "$p installed but ${PKG_FILE[$p]} is still missing"
  done
  log "installed in $(since "$t0")s"
}

# ---------------------------------------------------------------- kernel
# modules the guest loads (dependencies are added by modprobe --show-depends):
# crc32_generic gives the crypto "crc32" that rxe's ICRC needs (crc32-pclmul
# cannot load: TCG's default CPU has no PCLMUL, and busybox insmod does not
# resolve the crypto-crc32 alias), 9p over virtio for the host shares, veth for
# the wire between rxe0 and rxe1, then the RDMA stack.
MODULES=(crc32_generic virtio_pci 9pnet_virtio 9p veth
         ib_core ib_uverbs ib_umad rdma_ucm rdma_rxe)
# loaded only with --pcie: the emulated NIC's driver and the kernel's AER error injector
PCIE_MODULES=(e1000e aer_inject)

resolve_kernel() {
  if [[ -n "${RDMA_EXPORTER_VM_KERNEL:-}" ]]; then echo "$RDMA_EXPORTER_VM_KERNEL"; return; fi
  local img
  img=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [[ -z "$img" ]]; then
    # no apt lists: prefer a kernel that is already cached over the network
    local cached
    cached=$(ls -d "$CACHE"/kernel-*/ 2>/dev/null | sed 's|.*/kernel-||; s|/$||' | sort -V | tail -n1)
    if [[ -n "$cached" ]]; then echo "$cached"; return; fi
    ((EUID == 0)) || die "cannot resolve linux-image-amd64 (apt lists are empty; run apt-get update as root)"
    apt_get update -qq >&2 || die "apt-get update failed"
    img=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  fi
  [[ -n "$img" ]] || die "cannot resolve the package that linux-image-amd64 depends on"
  echo "${img#linux-image-}"
}

ensure_kernel() {
  local kv=$1 kdir=$CACHE/kernel-$1
  # a cache from before PCIE_MODULES lacks modules.pcie: fetched again, once
  [[ -f "$kdir/ok" && -f "$kdir/modules.pcie" ]] && return 0
  local t0=$EPOCHREALTIME tmp
  tmp=$(mktemp -d "$CACHE/.kernel.XXXXXX")
  log "fetching linux-image-$kv (apt-get download; it is unpacked, never installed)"
  chmod 0777 "$tmp"   # apt's sandbox user _apt writes the .deb here
  (cd "$tmp" && limited apt-get download -qq "linux-image-$kv") >&2 || {
    rm -rf "$tmp"; die "apt-get download linux-image-$kv failed (no network to the Debian mirror? try apt-get update)"; }
  dpkg-deb -x "$tmp"/linux-image-"$kv"_*.deb "$tmp/root" || { rm -rf "$tmp"; die "dpkg-deb -x failed"; }
  local vmlinuz=$tmp/root/boot/vmlinuz-$kv off
  [[ -f "$vmlinuz" ]] || { rm -rf "$tmp"; die "no /boot/vmlinuz-$kv in the package"; }
  # uncompressed ELF vmlinux, as the kernel's scripts/extract-vmlinux does it
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n1 | cut -d: -f1)
  [[ -n "$off" ]] || { rm -rf "$tmp"; die "no xz payload in vmlinuz-$kv"; }
  tail -c +$((off + 1)) "$vmlinuz" | xz -dc 2>/dev/null > "$tmp/vmlinux" || true  # trailing data: xz exits 1
  [[ "$(head -c4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]] || { rm -rf "$tmp"; die "vmlinux extraction failed"; }
  depmod -b "$tmp/root" "$kv"
  # the needed modules only, in load order, uncompressed: MODULES in modules.list, the --pcie ones
  # in modules.pcie (init loads those only when asked to); each module once across both lists
  mkdir -p "$tmp/modules"
  : > "$tmp/modules.list"; : > "$tmp/modules.pcie"
  local m p dst list
  for m in "${MODULES[@]}" -- "${PCIE_MODULES[@]}"; do
    if [[ "$m" == -- ]]; then list=pcie; continue; fi
    while read -r _ p _; do
      p=${p#"$tmp/root"}
      dst=${p%.xz}
      grep -qxF "$dst" "$tmp/modules.list" "$tmp/modules.pcie" && continue
      install -D -m644 "$tmp/root$p" "$tmp/modules$p"
      [[ "$p" == *.xz ]] && xz -d "$tmp/modules$p"
      echo "$dst" >> "$tmp/modules.${list:-list}"
    done < <(modprobe -d "$tmp/root" -S "$kv" --show-depends "$m" | grep '^insmod') \
      || { rm -rf "$tmp"; die "module $m not found in linux-image-$kv"; }
  done
  grep -q '/rdma_rxe\.ko$' "$tmp/modules.list" || { rm -rf "$tmp"; die "rdma_rxe.ko not in linux-image-$kv"; }
  rm -rf "$tmp/root" "$tmp"/*.deb
  chmod 0755 "$tmp"; touch "$tmp/ok"
  rm -rf "$kdir"; mv "$tmp" "$kdir"
  log "kernel $kv ready in $(since "$t0")s ($(wc -l < "$kdir/modules.list") modules)"
}

ensure_initrd() {  # prints the initramfs path
  local kv=$1 kdir=$CACHE/kernel-$1 key out
  key=$( { cat "$HERE/lib/init" "$kdir/modules.list" "$kdir/modules.pcie"; sha256sum /bin/busybox; } | sha256sum | cut -c1-16)
  out=$CACHE/initrd-$kv-$key.cpio
  if [[ ! -f "$out" ]]; then
    local t0=$EPOCHREALTIME st
    st=$(mktemp -d "$CACHE/.initrd.XXXXXX")
    mkdir -p "$st"/{bin,dev,proc,sys,tmp,mnt,host,etc/vm}
    install -m755 /bin/busybox "$st/bin/busybox"
    install -m755 "$HERE/lib/init" "$st/init"
    cp -a "$kdir/modules/." "$st/"
    cp "$kdir/modules.list" "$st/etc/vm/modules"
    cp "$kdir/modules.pcie" "$st/etc/vm/modules.pcie"
    (cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) > "$st.cpio"
    mv "$st.cpio" "$out"; rm -rf "$st"
    # keep only the newest few images
    ls -t "$CACHE"/initrd-*.cpio 2>/dev/null | tail -n +5 | xargs -r rm -f
    vlog "initramfs $out built in $(since "$t0")s"
  fi
  echo "$out"
}

prepare() {
  ensure_packages
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  limited flock 9 || die "cannot lock $CACHE/.lock"
  KV=$(resolve_kernel)
  ensure_kernel "$KV"
  INITRD=$(ensure_initrd "$KV")
  VMLINUX=$CACHE/kernel-$KV/vmlinux
  exec 9>&-
}

prepare
if ((PREPARE)); then
  log "ready: kernel $KV, $INITRD ($(since "$T_START")s)"
  exit 0
fi

# ---------------------------------------------------------------- run
CTL=$(mktemp -d "${TMPDIR:-/tmp}/rdma_exporter-vm.XXXXXX")
QPID=
cleanup() {
  [[ -n "$QPID" ]] && kill "$QPID" 2>/dev/null
  rm -rf "$CTL"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cp "$HERE/lib/stage2.sh" "$CTL/stage2.sh"
{
  printf 'export VM_CWD=%q\n' "$PWD"
  [[ -n "$BUILD_DIR" ]] && printf 'export VM_BUILD_DIR=%q\n' "$BUILD_DIR"
  [[ -n "${CI:-}" ]] && printf 'export CI=%q\n' "$CI"
  # The host's PATH (the guest runs the host's userland): ctest puts the unpacked test tools first.
  printf 'export PATH=%q\n' "$PATH"
  for v in ${RDMA_EXPORTER_VM_PASSENV:-}; do
    [[ -n "${!v+x}" ]] && printf 'export %s=%q\n' "$v" "${!v}"
  done
  if ((SHELL_MODE)) && [[ -t 0 ]]; then
    printf 'export TERM=%q\n' "${TERM:-vt100}"
    read -r rows cols < <(stty size 2>/dev/null) && printf 'VM_STTY=%q\n' "rows $rows cols $cols"
  fi
} > "$CTL/env.sh"
if ((${#CMD[@]})); then printf '%q ' "${CMD[@]}" > "$CTL/cmd.sh"; echo >> "$CTL/cmd.sh"; else : > "$CTL/cmd.sh"; fi

QEMU=(qemu-system-x86_64 -accel tcg,thread=multi -M q35 -smp "$SMP" -m "$MEM"
      -nodefaults -no-user-config -display none -nic none -no-reboot
      -kernel "$VMLINUX" -initrd "$INITRD"
      -fsdev "local,id=ctl,path=$CTL,security_model=none"
      -device virtio-9p-pci,fsdev=ctl,mount_tag=vm_ctl
      -fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
      -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot)
# The guest puts fresh tmpfs on /tmp, /run and /var/tmp: a checkout under one of them (a CI
# clone in /tmp, say) would vanish there, so share it explicitly, before any build dir inside it.
REPO_ROOT=$(cd "$HERE/../.." && pwd)
case "$REPO_ROOT/" in
  /tmp/*|/run/*|/var/tmp/*) RWDIRS=("$REPO_ROOT" "${RWDIRS[@]}") ;;
esac
: > "$CTL/mounts"
for i in "${!RWDIRS[@]}"; do
  d=${RWDIRS[$i]}
  [[ "$d" == *,* ]] && die "QEMU cannot share a path with a comma: $d"
  QEMU+=(-fsdev "local,id=rw$i,path=$d,security_model=none,multidevs=remap"
         -device "virtio-9p-pci,fsdev=rw$i,mount_tag=rw$i")
  printf 'rw%s %s\n' "$i" "$d" >> "$CTL/mounts"
done

# --pcie: a root port whose slot can do Gen3 x4, a switch behind it (upstream + one downstream
# port) and an e1000e behind the switch. QEMU 7.2's switch ports and e1000e are Gen1 x1 devices, so
# every link trains at 2.5 GT/s x1: the root port runs below its own maximum, and no link is
# degraded (both ends of each link are at what the weaker end supports). The NIC has no netdev
# peer: its frames go nowhere.
if ((PCIE)); then
  QEMU+=(-device pcie-root-port,id=rp1,bus=pcie.0,addr=0x10,chassis=1,slot=1,x-speed=8,x-width=4
         -device x3130-upstream,id=sw1up,bus=rp1
         -device xio3130-downstream,id=sw1dn,bus=sw1up,chassis=2,slot=0
         -netdev hubport,id=nic1net,hubid=0
         -device e1000e,id=nic1,bus=sw1dn,netdev=nic1net,mac=52:54:00:77:00:10)
fi

# seconds a boot may take to start CMD before it is tried once more (see boot below)
BOOT_LIMIT=${RDMA_EXPORTER_VM_BOOT_LIMIT:-120}
GUEST_TIMEOUT=0
if ((TIMEOUT > 0)); then
  # the guest gives up a little before the host kills QEMU, so that it can say so
  GUEST_TIMEOUT=$(( $(left) > 20 ? $(left) - 8 : $(left) ))
fi
KARGS="console=ttyS0 panic=-1 ${RDMA_EXPORTER_VM_KARGS-tsc=reliable} vm.timeout=$GUEST_TIMEOUT vm.mode=$([[ $SHELL_MODE == 1 ]] && echo shell || echo run)"
((PCIE)) && KARGS+=" vm.pcie=1"
[[ "$VERBOSE" == 1 ]] && KARGS+=" loglevel=6 vm.verbose=1" || KARGS+=" quiet loglevel=3"
QEMU+=(-append "$KARGS")

vlog "prepared in $(since "$T_START")s; booting kernel $KV (${TIMEOUT}s limit)"
T_BOOT=$EPOCHREALTIME
if ((SHELL_MODE)); then
  log "booting; the shell comes up in a few seconds. 'exit' or Ctrl-a x leaves."
  QEMU+=(-serial mon:stdio)
  if ((TIMEOUT > 0)); then timeout -k 5 "$(left)" "${QEMU[@]}" || true; else "${QEMU[@]}" || true; fi
else
  QEMU+=(-chardev stdio,id=con,signal=off -serial chardev:con)
  boot() {
    # the console (the command's stdout+stderr), without the serial line's CRs
    # and without the kernel's closing "reboot: Power down"
    { if ((TIMEOUT > 0)); then exec timeout -k 5 "$(left)" "${QEMU[@]}"; else exec "${QEMU[@]}"; fi; } \
      </dev/null 2>&1 > >(sed -u -e 's/\r$//' -e '/^\[ *[0-9.]*\] reboot: Power down$/d') &
    QPID=$!
  }
  boot
  # A guest that has not started CMD within BOOT_LIMIT s (stage 2 touches ctl/started first; a
  # boot reaches it in ~10 s, under load in well under a minute) hung before its first console
  # line: once under TCG on a busy CI host (2026-12-02, vm.prober.trace: 420 s without a line).
  # It is booted again, once; a second hang, or a command that hangs, meets the limits as before.
  t_boot=$SECONDS
  while kill -0 "$QPID" 2>/dev/null && [[ ! -e "$CTL/started" ]] && ((SECONDS - t_boot < BOOT_LIMIT)); do sleep 0.5; done
  if [[ ! -e "$CTL/started" ]] && kill -0 "$QPID" 2>/dev/null && ((TIMEOUT == 0 || $(left) > 60)); then
    log "the guest did not start its command within ${BOOT_LIMIT}s (a boot hang); booting it again"
    kill "$QPID" 2>/dev/null; wait "$QPID" 2>/dev/null || true
    wait 2>/dev/null || true   # the first console's sed
    rm -f "$CTL/rc"
    boot
  fi
  qrc=0; wait "$QPID" || qrc=$?
  QPID=
  wait 2>/dev/null || true   # let sed flush the console
  if ((qrc == 124 || qrc == 137)); then
    log "ERROR: timed out after ${TIMEOUT}s in total (QEMU killed); raise --timeout or RDMA_EXPORTER_VM_TIMEOUT"
    exit 124
  elif ((qrc != 0)); then
    log "ERROR: QEMU exited with $qrc"
  fi
fi

rc=$(cat "$CTL/rc" 2>/dev/null || true)
if [[ -z "$rc" ]]; then
  log "ERROR: the guest stopped without an exit code (crash? run with RDMA_EXPORTER_VM_VERBOSE=1)"
  exit 125
fi
case $rc in
  124) log "ERROR: the guest watchdog fired (limit ${TIMEOUT}s)";;
  125) log "ERROR: the lab could not be set up in the guest (see the messages above)";;
esac
log "guest finished in $(since "$T_BOOT")s (total $(since "$T_START")s), exit code $rc"
exit "$rc"
