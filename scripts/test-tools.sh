#!/usr/bin/env bash
# Test tools that Debian packages together with a service, unpacked (never installed) into a
# private directory: their maintainer scripts never run, so nothing is enabled or started.
#   prometheus (prometheus, promtool), prometheus-node-exporter, opensm
# Prints the directory; ctest puts its usr/bin and usr/sbin first on every test's PATH
# (tests/CMakeLists.txt). Idempotent: unpacks again only when the package list changes.
#   scripts/test-tools.sh         fetch (apt-get download) and unpack what is missing
#   scripts/test-tools.sh --dir   only print the directory
#   RDMA_EXPORTER_TOOLS           the directory (default ${XDG_CACHE_HOME:-~/.cache}/rdma_exporter/tools)
# Their shared libraries are ordinary packages that install-deps.sh --test installs (opensm's
# libopensm9, libosmcomp5, libosmvendor5, libwrap0; the Go programs need only libc).
set -euo pipefail
dir="${RDMA_EXPORTER_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma_exporter/tools}"
PACKAGES=(prometheus prometheus-node-exporter opensm)
if [ "${1:-}" = "--dir" ]; then echo "$dir/root"; exit 0; fi

want="${PACKAGES[*]}"
if [ ! -f "$dir/.unpacked" ] || [ "$(cat "$dir/.unpacked")" != "$want" ]; then
  rm -rf "$dir/root" "$dir/debs" "$dir/.unpacked"
  mkdir -p "$dir/debs"
  (cd "$dir/debs" && { apt-get download -qq "${PACKAGES[@]}" 2>/dev/null ||
                        { apt-get update -qq && apt-get download -qq "${PACKAGES[@]}"; }; }) >&2
  for p in "${PACKAGES[@]}"; do
    deb=$(ls "$dir/debs/${p}_"*.deb)
    dpkg-deb -x "$deb" "$dir/root"
  done
  printf '%s' "$want" > "$dir/.unpacked"
fi
for exe in usr/bin/prometheus usr/bin/promtool usr/bin/prometheus-node-exporter usr/sbin/opensm; do
  [ -x "$dir/root/$exe" ] || { echo "test-tools: $dir/root/$exe missing" >&2; exit 1; }
  if ldd "$dir/root/$exe" 2>/dev/null | grep -q "not found"; then
    echo "test-tools: $exe lacks libraries (scripts/install-deps.sh --test installs them):" >&2
    ldd "$dir/root/$exe" | grep "not found" >&2
    exit 1
  fi
done
echo "$dir/root"
