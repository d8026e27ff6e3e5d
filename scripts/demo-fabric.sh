#!/usr/bin/env bash
# Writes the bundled demo fabric (a realistic fake /sys: mlx5 InfiniBand and RoCE ports, a bond,
# bnxt_re before and after its 2025 counter rename, AMD Pensando ionic, Huawei hns, Microsoft mana,
# rxe, a DOWN port; ionic and the new bnxt_re each under a PCIe switch with a GPU, with link and AER
# files) and keeps its counters moving, like a busy node.
#   scripts/demo-fabric.sh DIR            write DIR and tick every second until killed
#   scripts/demo-fabric.sh DIR --no-tick  only write it
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: demo-fabric.sh DIR [--no-tick]}
# Written beside DIR and renamed into place: whoever waits for DIR sees it whole (links are relative).
rm -rf "$dir" "$dir.new"
python3 "$here/tests/lib/sysfs_gen.py" "$dir.new" --profile demo
mv "$dir.new" "$dir"
[ "${2:-}" = "--no-tick" ] && exit 0
exec python3 "$here/tests/lib/sysfs_gen.py" "$dir" --tick --interval 1
