#!/usr/bin/env bash
# Builds the .deb with CPack, unpacks it with dpkg into a scratch root (never the real one), checks
# its contents and control data, and verifies the packaged unit with `systemd-analyze verify`
# against that root (Debian's systemd units are copied in so that its dependencies resolve).
# usage: deb_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$work/pkg" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/pkg/*.deb)
echo "built $(basename "$deb")"
dpkg-deb -I "$deb" > "$work/info"
dpkg-deb -f "$deb" Package Version Architecture Depends
grep -q '^ Package: rdma-exporter$' "$work/info" || fail "package name"
grep -q '^ Depends:.*libibverbs1' "$work/info" || fail "shlibdeps Depends"
[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)" = "/etc/rdma_exporter/rdma_exporter.yml" ] || fail "conffiles"

root="$work/root"
dpkg -x "$deb" "$root"
for f in usr/bin/rdma_exporter lib/systemd/system/rdma_exporter.service etc/rdma_exporter/rdma_exporter.yml; do
  [ -f "$root/$f" ] || fail "/$f not in the package"
done
[ -x "$root/usr/bin/rdma_exporter" ] || fail "binary not executable"
"$root/usr/bin/rdma_exporter" --version
# Every file the unit's Documentation= names is in the package.
for doc in $(sed -n 's/^Documentation=//p' "$root/lib/systemd/system/rdma_exporter.service"); do
  case $doc in file:*) [ -f "$root/${doc#file:}" ] || fail "Documentation=$doc is not in the package" ;; esac
done
cmp "$root/etc/rdma_exporter/rdma_exporter.yml" "$(dirname "$0")/../../deploy/rdma_exporter.yml" || fail "config differs"

# systemd-analyze verify in the scratch root: the unit, its ExecStart binary, its dependencies.
mkdir -p "$root/lib/systemd/system"
cp -rn /lib/systemd/system/. "$root/lib/systemd/system/"
out=$(systemd-analyze verify --root="$root" /lib/systemd/system/rdma_exporter.service 2>&1) || { echo "$out"; fail "systemd-analyze verify"; }
[ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify printed warnings"; }
echo "systemd-analyze verify: ok"
systemd-analyze security --offline=yes --root="$root" --threshold=30 rdma_exporter.service | tail -1 ||
  fail "systemd-analyze security: exposure above 3"
echo "deb test: ok"
