#!/usr/bin/env bash
# Installs the pinned npm tools the deploy tests use into a cache directory outside the repository
# and prints that directory's node_modules path. Idempotent: reinstalls only when the pins change.
#   RDMA_EXPORTER_NPM_CACHE  where to install (default: ${XDG_CACHE_HOME:-~/.cache}/rdma_exporter/npm-deploy)
set -euo pipefail
dir="${RDMA_EXPORTER_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma_exporter/npm-deploy}"
# Pins (exact versions). kubernetes-models validates objects against the API schemas (types,
# required fields, enums); kubernetes-types + typescript catch unknown fields (excess properties).
pins='{
  "name": "rdma-exporter-deploy-tests",
  "private": true,
  "dependencies": {
    "kubernetes-models": "5.1.0",
    "@kubernetes-models/prometheus-operator": "6.0.0",
    "kubernetes-types": "1.30.0",
    "typescript": "5.9.3",
    "yaml": "2.9.1",
    "dockerfilelint": "1.8.0"
  }
}'
mkdir -p "$dir"
if [ ! -f "$dir/.installed" ] || [ "$(cat "$dir/.installed")" != "$pins" ]; then
  printf '%s\n' "$pins" > "$dir/package.json"
  rm -f "$dir/.installed"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >&2)
  printf '%s' "$pins" > "$dir/.installed"
fi
echo "$dir/node_modules"
