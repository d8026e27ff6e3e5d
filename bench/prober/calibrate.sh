#!/bin/bash
# The same calibrations as bench/prober/run.sh's, to run on the host: the ratio of guest to host
# CPU time is TCG's slowdown, used to extrapolate the guest's CPU figures. Three kinds of code:
# an awk loop (interpreted, user space), the prober loop's own C++ logic (bench_prober_engine),
# and the kernel path of one timer wake-up through epoll (bench_prober_wake). CPU time, not wall
# time, so that other work on the host's shared cores does not count; three runs, the fastest
# counts.
#   bench/prober/calibrate.sh [BUILD_DIR]   (default: build)
TIMEFORMAT='%U %R'
for i in 1 2 3; do
  { time awk 'BEGIN { for (i = 0; i < 20000000; i++) s += i }'; } 2>&1 | awk '{ printf "awk loop of 2e7 iterations: user %.2f s (wall %.2f s)\n", $1, $2 }'
done
B=${1:-build}/bench
for i in 1 2 3; do echo "C++, the loop's logic: $("$B/bench_prober_engine" 256 600 5 4 | tail -1)"; done
for i in 1 2 3; do echo "kernel, a timer wake-up: $("$B/bench_prober_wake" 5000 200)"; done
