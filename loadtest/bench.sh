#!/usr/bin/env bash
# bench.sh OUTDIR — the load-test runs recorded in docs/BENCHMARKS.md, in
# order, one file per run in OUTDIR. Run from the repository root as root
# (peers.sh installs and restarts Redis and beanstalkd). Takes ~12 minutes.
#
# Each run spawns a fresh tickwheel pinned to CPU 0 and pins the generator
# to CPU 1; the peers are restarted (fresh processes, also on CPU 0) before
# each run that measures them, so RSS figures start from an empty server.
set -euo pipefail
out=${1:?usage: loadtest/bench.sh OUTDIR}
mkdir -p "$out"
go build -o /tmp/tickwheel ./cmd/tickwheel
(cd loadtest && go build -o /tmp/loadtest ./cmd/loadtest)

peers="-redis 127.0.0.1:6390 -beanstalkd 127.0.0.1:11390"
all="tickwheel,redis,beanstalkd,afterfunc"
run() {
	local name=$1
	shift
	echo "== $(date +%T) $name: loadtest -spawn /tmp/tickwheel $*"
	/tmp/loadtest -spawn /tmp/tickwheel "$@" >"$out/$name.txt" 2>&1 || echo "   $name: FAILED (see $out/$name.txt)"
}
fresh() { loadtest/peers.sh stop >/dev/null 2>&1 || true; loadtest/peers.sh start >/dev/null; }

# A: every peer side by side at the default sizes (100k timers), three times.
for i in 1 2 3; do
	fresh
	run "side-by-side-$i" $peers -targets $all -scenarios add,cancel,repeat,fire,lateness -rate 50000 -lead 2s -grace 10s
done
# B: add and fire with 1M timers.
fresh
run million $peers -targets $all -scenarios add,fire -n 1000000 -lead 15s -grace 40s
# C: memory and idle CPU holding 1M and 10M timers (each in a fresh server).
fresh
run hold-1m $peers -targets $all -scenarios hold -n 1000000 -hold 10s
fresh
run hold-10m $peers -targets tickwheel,redis,afterfunc -scenarios hold -n 10000000 -hold 10s
# D: 10k idle connections, and fast-forwarding a day over 1M timers (tickwheel only).
run idle-ff -targets tickwheel -scenarios idle,ff -idle 10000 -hold 10s -n 1000000
# E: lateness at a rate beanstalkd sustains.
fresh
run lateness-5k $peers -targets $all -scenarios lateness -rate 5000 -duration 10s -lead 3s -grace 10s
loadtest/peers.sh stop >/dev/null
echo "== $(date +%T) done: $out"
