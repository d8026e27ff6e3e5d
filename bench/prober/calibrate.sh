#!/bin/bash
# The same CPU-bound loop as bench/prober/run.sh's calibration, to run on the host: the ratio of
# the two user CPU times is the TCG slowdown used to extrapolate the guest's CPU figures. CPU
# time, not wall time, so that other work on the host's shared cores does not count; three runs,
# the fastest counts.
TIMEFORMAT='%U %R'
for i in 1 2 3; do
  { time awk 'BEGIN { for (i = 0; i < 20000000; i++) s += i }'; } 2>&1 | awk '{ printf "awk loop of 2e7 iterations: user %.2f s (wall %.2f s)\n", $1, $2 }'
done
