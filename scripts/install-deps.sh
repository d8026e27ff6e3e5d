#!/usr/bin/env bash
# Installs the Debian bookworm packages rdma_exporter needs. Idempotent: only missing packages are
# installed. Needs root (or sudo). No install starts or enables a service.
#   scripts/install-deps.sh          README command 1: what building and running need
#   scripts/install-deps.sh --test   README command 2: that, plus every tool the test suite uses
# Test tools that Debian ships with a service (Prometheus, node_exporter, opensm) are never
# installed: scripts/test-tools.sh unpacks their .debs into a private directory that ctest puts on
# the tests' PATH (their postinst scripts would enable the services, and opensm's would start a
# subnet manager on any host with /sys/class/infiniband_mad). The rest is installed under a
# temporary policy-rc.d that forbids starting services (rdma-core's postinst starts iwpmd).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

RUN=(
  # build
  build-essential cmake pkg-config
  # libraries (rdma-core's -dev packages; the HTTP server, config, logs; TLS and bcrypt)
  libibverbs-dev libibumad-dev libibmad-dev libibnetdisc-dev
  libcivetweb-dev libyaml-cpp-dev libspdlog-dev libfmt-dev zlib1g-dev libmnl-dev libssl-dev libcrypt-dev
  # civetweb's CMake config names its /usr/bin/civetweb (a plain binary, no service)
  civetweb
  # verbs providers (the prober on real devices); python3 generates the demo fabric
  ibverbs-providers python3
  # the workload collector's CRI and PodResources gRPC module (loaded only when a socket is set)
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  # the workload collector's Kubernetes API client: HTTPS (its own dlopen()ed module) and the PodList decoder
  libcurl4-openssl-dev nlohmann-json3-dev
)
TEST=(
  # build: the tests' framework, the build cache CI relies on, the revision label
  catch2 ccache git
  # Python modules the tests import beyond the standard library (jsonschema: the dashboards
  # against tests/deploy/grafana-dashboard.schema.json)
  python3-yaml python3-jsonschema
  # tools the tests run: HTTP, netns/veth, certificates, load bench
  curl iproute2 ethtool openssl wrk
  # fuzzing and sanitizer runs (clang + libFuzzer)
  clang libclang-rt-14-dev
  # pma tests: the fabric simulator, its LD_PRELOAD shim, perfquery; opensm's libraries (opensm
  # itself is unpacked by test-tools.sh)
  ibsim-utils libumad2sim0 infiniband-diags libopensm9 libosmcomp5 libosmvendor5 libwrap0
  # VM tests (tests/vm/vm-run.sh installs the same when missing)
  qemu-system-x86 busybox-static kmod cpio xz-utils rdma-core ibverbs-utils perftest strace
  # deploy tests: Node.js for the pinned npm validators, CPack .deb (dpkg-shlibdeps runs `file`),
  # systemd-analyze, apt-get download (Debian's kubernetes-client) and the image build-and-run test
  nodejs dpkg-dev file systemd buildah debootstrap
  # workload collector: the CRI/PodResources protocol doubles (Debian's python3)
  python3-grpcio python3-protobuf
)

packages=("${RUN[@]}")
test=0
case "${1:-}" in
  --test) test=1; packages+=("${TEST[@]}") ;;
  "") ;;
  *) echo "usage: $0 [--test]" >&2; exit 2 ;;
esac
# Debian's nodejs needs the npm package; NodeSource's nodejs bundles npm.
((test)) && ! command -v npm >/dev/null 2>&1 && packages+=(npm)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Belt and braces: maintainer scripts may not start services (invoke-rc.d and deb-systemd-invoke
  # ask policy-rc.d); an existing policy-rc.d is put back afterwards.
  policy=/usr/sbin/policy-rc.d saved=""
  if [ -e "$policy" ]; then saved=$(mktemp); $SUDO cp -p "$policy" "$saved"; fi
  restore() {
    if [ -n "$saved" ]; then $SUDO cp -p "$saved" "$policy"; rm -f "$saved"; else $SUDO rm -f "$policy"; fi
  }
  trap restore EXIT
  printf '#!/bin/sh\n# rdma_exporter install-deps.sh: no service starts during the install\nexit 101\n' |
    $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  restore
  trap - EXIT
fi
if ((test)); then "$here/test-tools.sh" >/dev/null; fi
