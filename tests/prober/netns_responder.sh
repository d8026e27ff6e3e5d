#!/usr/bin/env bash
# netns test of the prober's responder against a flood from one IPv6 /64: runs the hidden Catch2
# cases tagged [netns] of prober_responder_tests in a network namespace of their own, where lo
# holds 64 addresses of fd00:5a:1:2::/64 (the flood's sources), fd00:5a:1:3::1 (a second /64 that
# must keep its share) and fd00:5a:1:4::1 (the responder's address; the real peer connects from
# it). The namespace ends with the test process: nothing to clean up.
# Usage: netns_responder.sh --tests PATH   (root; without root or a tool it fails)
set -uo pipefail

TESTS=
while [[ $# -gt 0 ]]; do
  case $1 in
    --tests) TESTS=$2; shift 2 ;;
    *) echo "usage: $0 --tests PATH"; exit 2 ;;
  esac
done
[[ -x "$TESTS" ]] || { echo "FATAL: $TESTS is not executable"; exit 2; }
if [[ $(id -u) -ne 0 ]]; then echo "FATAL: the netns test needs root (unshare --net, ip addr add)"; exit 1; fi
for tool in ip unshare; do
  command -v $tool >/dev/null || { echo "FATAL: $tool is not installed (scripts/install-deps.sh)"; exit 1; }
done

export TESTS
exec unshare --net -- bash -euo pipefail -c '
  ip link set lo up
  for i in $(seq 1 64); do ip -6 addr add "fd00:5a:1:2::$(printf %x "$i")/64" dev lo nodad; done
  ip -6 addr add fd00:5a:1:3::1/64 dev lo nodad
  ip -6 addr add fd00:5a:1:4::1/64 dev lo nodad
  [[ $(ip -6 addr show dev lo | grep -c "inet6 fd00:5a:") -eq 66 ]] || { echo "FATAL: the addresses did not all come up"; exit 1; }
  exec "$TESTS" "[netns]" --warn NoTests
'
