#!/usr/bin/env bash
# The idle cost of live timers, to the microsecond: a tickwheel server in
# memory pinned to CPU 0, preloaded with N timers (due 1 hour to 1 week
# away, not bound, so they stay) by loadtest -preload, left alone for
# SETTLE seconds, then its CPU time (the sum of its threads' run time in
# /proc/PID/task/*/schedstat, in ns) and its threads' runs (the times one
# was switched to: its wake-ups) over SECONDS seconds of idleness.
#   loadtest/idle-cpu.sh TICKWHEEL_BINARY LOADTEST_BINARY [N] [SECONDS] [SETTLE]
# Extra server flags in $EXTRA (e.g. EXTRA="-http-addr off"); the server
# inherits the environment ($GOMAXPROCS, ...). PIN=0 leaves it unpinned.
set -euo pipefail
bin=$1 gen=$2 n=${3:-1000000} secs=${4:-60} settle=${5:-12}
port=$((20000 + RANDOM % 20000))
pin=(taskset -c 0)
[ "${PIN:-1}" = 0 ] && pin=()
TICKWHEEL_ADMIN_TOKEN=idle-cpu-admin-token "${pin[@]}" "$bin" -addr 127.0.0.1:$port -data-dir "" ${EXTRA:-} >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
sleep 0.5
"$gen" -addr 127.0.0.1:$port -token idle-cpu-admin-token -targets tickwheel -preload "$n" -scenarios add -n 1000 >/dev/null 2>&1
sleep "$settle"
cpu() { cat /proc/$pid/task/*/schedstat | awk '{s += $1; r += $3} END {printf "%.0f %.0f\n", s, r}'; }
read -r a ra < <(cpu); sleep "$secs"; read -r b rb < <(cpu)
awk -v d=$((b - a)) -v r=$((rb - ra)) -v s="$secs" -v n="$n" 'BEGIN {printf "%d timers: %d µs of CPU in %d s idle = %.4f%% of a core; %.1f thread runs a second\n", n, d/1000, s, d/(s*1e7), r/s}'
