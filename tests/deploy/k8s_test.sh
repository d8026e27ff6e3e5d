#!/usr/bin/env bash
# Renders the Kustomize base and overlays (rdma-devices, prober, the opt-in rdma-devices-cri, gpu-8x8), validates the objects offline against the Kubernetes
# schemas (npm kubernetes-models, kubernetes-types + tsc) and checks what they must say.
# usage: k8s_test.sh --exporter PATH REPO_ROOT
# Renderer: `kubectl kustomize` when kubectl is on PATH; otherwise Debian's kubernetes-client
# (kubectl 1.20, kustomize v2.0) unpacked into a cache directory (the manifests are written to
# render the same with both).
set -euo pipefail
source "$(dirname "$0")/../lib/exporter_arg.sh"
root=$1 exporter=$EXPORTER
here=$(cd "$(dirname "$0")" && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/rdma_exporter"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# RDMA_EXPORTER_KUBECTL="" forces the Debian fallback.
kubectl=${RDMA_EXPORTER_KUBECTL-$(command -v kubectl || true)}
if [ -z "$kubectl" ]; then
  kubectl="$cache/kubernetes-client/usr/bin/kubectl"
  if [ ! -x "$kubectl" ]; then
    mkdir -p "$cache/debs"
    (cd "$cache/debs" && { apt-get download kubernetes-client 2>/dev/null ||
                            { apt-get update -qq && apt-get download kubernetes-client; }; })
    dpkg-deb -x "$(ls "$cache"/debs/kubernetes-client_*.deb | tail -1)" "$cache/kubernetes-client"
  fi
fi
echo "renderer: $kubectl ($("$kubectl" version --client 2>/dev/null | head -1))"
"$kubectl" kustomize "$root/deploy/kubernetes/base" > "$work/base.yaml" 2> "$work/warnings"
"$kubectl" kustomize "$root/deploy/kubernetes/overlays/rdma-devices" > "$work/overlay.yaml" 2>> "$work/warnings"
"$kubectl" kustomize "$root/deploy/kubernetes/overlays/prober" > "$work/prober.yaml" 2>> "$work/warnings"
"$kubectl" kustomize "$root/deploy/kubernetes/overlays/rdma-devices-cri" > "$work/cri.yaml" 2>> "$work/warnings"
"$kubectl" kustomize "$root/deploy/kubernetes/overlays/gpu-8x8" > "$work/gpu-8x8.yaml" 2>> "$work/warnings"
grep -v "is deprecated" "$work/warnings" >&2 || true
echo "rendered: base $(grep -c '^kind:' "$work/base.yaml") objects, rdma-devices $(grep -c '^kind:' "$work/overlay.yaml") objects, prober $(grep -c '^kind:' "$work/prober.yaml") objects"

node_modules=$("$here/npm-tools.sh")
NODE_PATH="$node_modules" node "$here/validate_k8s.mjs" "$work/base.yaml" "$work/overlay.yaml" "$work/prober.yaml" "$work/cri.yaml" "$work/gpu-8x8.yaml"
python3 "$here/check_k8s.py" "$work/base.yaml" "$work/overlay.yaml" "$exporter" "$root" "$work/prober.yaml" "$work/cri.yaml" "$work/gpu-8x8.yaml"
