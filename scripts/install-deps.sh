#!/usr/bin/env bash
# Installs every Debian bookworm package rdma_exporter needs to build, run and test.
# Idempotent: only missing packages are installed. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake pkg-config ccache git python3
  # libraries
  libibverbs-dev librdmacm-dev libibumad-dev libibmad-dev libibnetdisc-dev
  prometheus-cpp-dev libcivetweb-dev libyaml-cpp-dev libspdlog-dev libfmt-dev catch2 zlib1g-dev libmnl-dev
  # runtime providers and tools
  rdma-core ibverbs-providers infiniband-diags ethtool iproute2 curl
  # test peers: promtool/Prometheus, node_exporter (benchmark reference)
  prometheus prometheus-node-exporter
  # hardening (issue 9): TLS + bcrypt, test certificates, fuzzing (clang + libFuzzer), load bench
  libssl-dev libcrypt-dev openssl clang libclang-rt-14-dev wrk
  # pma collector tests (issue 6): InfiniBand fabric simulator, its LD_PRELOAD shim, subnet manager
  ibsim-utils libumad2sim0 opensm
  # deploy tests (issue 8): Node.js for the pinned npm validators (npm ships with this machine's
  # nodejs; on plain Debian add the npm package), CPack .deb (dpkg-shlibdeps), systemd-analyze
  nodejs dpkg-dev systemd
  # workload collector (issue 14), build/run: its CRI and PodResources gRPC module
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  # workload collector, test: the CRI/PodResources protocol doubles (Debian's python3)
  python3-grpcio python3-protobuf
)
# nodejs from other sources (NodeSource) bundles npm; Debian's nodejs needs the npm package.
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Installing Debian's prometheus/node-exporter packages must not start their services.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
