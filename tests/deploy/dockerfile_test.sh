#!/usr/bin/env bash
# The Dockerfile passes dockerfilelint (npm, pinned) and its runtime stage installs the Debian
# package of every shared library the built binary needs (no engine here to build the image).
# usage: dockerfile_test.sh --exporter PATH REPO_ROOT
set -euo pipefail
source "$(dirname "$0")/../lib/exporter_arg.sh"
root=$1 exporter=$EXPORTER
here=$(cd "$(dirname "$0")" && pwd)
node_modules=$("$here/npm-tools.sh")
node "$node_modules/dockerfilelint/bin/dockerfilelint" "$root/Dockerfile"
runtime=$(awk '/^FROM /{stage++} stage==2' "$root/Dockerfile")
for dir in sources exporter collectors bench cmake; do
  grep -q "^COPY $dir " "$root/Dockerfile" || { echo "FAIL: Dockerfile does not copy $dir/"; exit 1; }
done
missing=0
# The binary and the modules it dlopen()s from its build tree's lib/rdma_exporter.
modules=$(ls "$(dirname "$exporter")"/lib/rdma_exporter/librdma_exporter_*.so 2>/dev/null || true)
for lib in $(objdump -p "$exporter" $modules | awk '/NEEDED/{print $2}' | sort -u); do
  pkg=$(dpkg -S "*/$lib" 2>/dev/null | grep -v -- '-dev' | head -1 | cut -d: -f1)
  case "$pkg" in libc6|libstdc++6|libgcc-s1|"") continue ;; esac   # in the base image
  if grep -qw -- "$pkg" <<<"$runtime"; then echo "ok $lib -> $pkg"; else echo "FAIL $lib -> $pkg not installed in the runtime stage"; missing=1; fi
done
exit $missing
