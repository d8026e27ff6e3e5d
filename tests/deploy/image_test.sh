#!/usr/bin/env bash
# The container image, built and run for real: Debian's buildah builds the Dockerfile from a base
# imported from a `debootstrap --variant=minbase bookworm` root (tagged as the Dockerfile's FROM;
# no registry), then runs the image's entrypoint on the demo fabric and scrapes it on loopback.
# usage: image_test.sh REPO_ROOT   (root: debootstrap, buildah's chroot isolation)
#   RDMA_EXPORTER_IMAGE_CACHE  base rootfs tarball, image storage, ccache
#                              (default ${XDG_CACHE_HOME:-/var/tmp}/rdma_exporter-image)
# Isolation: chroot and the host network (no OCI runtime or network setup in this sandbox; podman
# run fails on setrlimit here). vfs storage: no overlay mounts needed.
set -euo pipefail
root=$(cd "$1" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (debootstrap, buildah --isolation chroot)"; exit 1; }
for tool in buildah debootstrap curl; do
  command -v $tool >/dev/null || { echo "FAIL: $tool missing (scripts/install-deps.sh --test installs it)"; exit 1; }
done
cache=${RDMA_EXPORTER_IMAGE_CACHE:-${XDG_CACHE_HOME:-/var/tmp}/rdma_exporter-image}
mkdir -p "$cache/ccache"
B=(buildah --root "$cache/storage" --runroot "$cache/runroot" --storage-driver vfs)
work=$(mktemp -d)
image=localhost/rdma-exporter:test
ctr="" buildah_pid=""
t0=$SECONDS
# Stops the exporter by PID: buildah run's descendants first, then buildah itself.
descendants() { local c; for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do descendants "$c"; echo "$c"; done; }
cleanup() {
  if [ -n "$buildah_pid" ]; then
    for p in $(descendants "$buildah_pid") "$buildah_pid"; do kill "$p" 2>/dev/null || true; done
    wait "$buildah_pid" 2>/dev/null || true
  fi
  [ -z "$ctr" ] || "${B[@]}" rm "$ctr" >/dev/null 2>&1 || true
  "${B[@]}" rmi --prune >/dev/null 2>&1 || true   # the previous build's untagged images
  rm -rf "$work"
}
trap cleanup EXIT

# The machine's Debian mirror (the one apt uses here; no other network may be reachable).
uris() {
  { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } |
    awk '/^URIs:/{for (i = 2; i <= NF; i++) print $i} /^deb /{for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; break}}'
}
mirror=$(uris | grep -v -- -security | grep /debian | head -1 || true)
security=$(uris | grep -- -security | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian} security=${security:-http://deb.debian.org/debian-security}

# 1. The base: a minbase bookworm root, cached as a tarball, with the apt sources of the official
#    image (bookworm, -updates, -security) on this machine's mirror.
base_tar="$cache/bookworm-minbase.tar"
if [ ! -s "$base_tar" ]; then
  echo "debootstrap --variant=minbase bookworm from $mirror (cached in $base_tar)"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; echo "FAIL: debootstrap"; exit 1; }
  rm -f "$work/rootfs/etc/apt/sources.list"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$security" > "$work/rootfs/etc/apt/sources.list.d/debian.sources"
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
  rm -rf "$work/rootfs"
fi
from=$(awk '/^FROM /{print $2}' "$root/Dockerfile" | sort -u)
if ! "${B[@]}" inspect --type image docker.io/library/debian:bookworm >/dev/null 2>&1; then
  c=$("${B[@]}" from scratch)
  mnt=$("${B[@]}" mount "$c")
  tar -C "$mnt" -xf "$base_tar"
  "${B[@]}" umount "$c" >/dev/null
  "${B[@]}" commit --rm "$c" docker.io/library/debian:bookworm >/dev/null
fi
for f in $from; do
  "${B[@]}" tag docker.io/library/debian:bookworm "docker.io/library/$f"
done
echo "base images ($(echo $from)) ready after $((SECONDS - t0)) s"

# 2. Build (the build stage compiles the project; ccache kept in the cache directory).
t1=$SECONDS
"${B[@]}" bud --isolation chroot --network host --pull=never --volume "$cache/ccache:/ccache" \
  -t "$image" -f "$root/Dockerfile" "$root" > "$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; echo "FAIL: image build"; exit 1; }
echo "image built in $((SECONDS - t1)) s"
# The base is a debootstrap minbase root, larger than Docker Hub's bookworm-slim: both printed.
echo "image size: $("${B[@]}" images --format '{{.Size}}' "$image")" \
  "(its base, the minbase root: $("${B[@]}" images --format '{{.Size}}' docker.io/library/debian:bookworm-slim | head -1))"

# 3. Run the image's entrypoint on the demo fabric (no ticking: values stay put) and scrape it.
demo="$work/demo"
"$root/scripts/demo-fabric.sh" "$demo" --no-tick
# 2^64-2 in a counter: the scrape must print it exactly.
echo 18446744073709551614 > "$demo/class/infiniband/mlx5_0/ports/1/counters/port_xmit_packets"
chmod -R a+rX "$work"
ctr=$("${B[@]}" from --pull=never "$image")
mapfile -t entry < <("${B[@]}" inspect --type container --format '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' "$ctr" | sed '/^$/d')
user=$("${B[@]}" inspect --type container --format '{{.OCIv1.Config.User}}' "$ctr")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "running ${entry[*]} as $user on the demo fabric, 127.0.0.1:$port"
"${B[@]}" run --isolation chroot --network host --user "$user" --volume "$demo:/host/sys:ro" "$ctr" -- \
  "${entry[@]}" --config.file=/etc/rdma_exporter/rdma_exporter.yml --path.sysfs=/host/sys \
  --web.listen-address=127.0.0.1:$port > "$work/run.log" 2>&1 &
buildah_pid=$!
for _ in $(seq 600); do
  curl -fsS "http://127.0.0.1:$port/metrics" -o "$work/metrics" 2>/dev/null && break
  kill -0 "$buildah_pid" 2>/dev/null || { cat "$work/run.log"; echo "FAIL: the container exited"; exit 1; }
  sleep 0.1
done
[ -s "$work/metrics" ] || { cat "$work/run.log"; echo "FAIL: no /metrics from the container"; exit 1; }

fail=0
check() { if grep -qE "$1" "$work/metrics"; then echo "ok $2"; else echo "FAIL $2"; fail=1; fi; }
for dev in $(ls "$demo/class/infiniband"); do
  check "^rdma_port_info\{[^}]*device=\"$dev\"" "rdma_port_info for $dev"
done
check '^rdma_port_transmit_packets_total\{device="mlx5_0",port="1"\} 18446744073709551614$' \
  "2^64-2 exported exactly"
check '^rdma_exporter_build_info\{' "build info"
if [ $fail -ne 0 ]; then head -c 3000 "$work/metrics"; tail -20 "$work/run.log"; fi
echo "image test: $((SECONDS - t0)) s in all"
exit $fail
