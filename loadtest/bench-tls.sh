#!/usr/bin/env bash
# bench-tls.sh OUTDIR [BASE_BIN [ROUNDS]] — the TLS figures of
# docs/BENCHMARKS.md ("TLS on the client port"): adds/s and fire lateness
# with TLS against plaintext in the same run (-tls spawns both); and, when
# BASE_BIN (a tickwheel built before TLS) is given, plaintext before against
# after, interleaved (their order swapped every other round). ROUNDS
# (default 5) rounds of each. Run from the repository root; summarize with
# loadtest/bench-tls-summary.py OUTDIR.
set -euo pipefail
out=${1:?usage: loadtest/bench-tls.sh OUTDIR [BASE_BIN]}
base=${2:-}
rounds=${3:-5}
mkdir -p "$out"
bin=$out/tickwheel lt=$out/loadtest
go build -o "$bin" ./cmd/tickwheel
(cd loadtest && go build -o "$lt" ./cmd/loadtest)
sizes="-n 1000000 -rate 20000 -duration 5s -lead 2s -grace 10s"
for i in $(seq "$rounds"); do
	echo "== $(date +%T) tls-vs-plain-$i"
	"$lt" -spawn "$bin" -tls -targets tickwheel -scenarios add,lateness,add,lateness $sizes -json \
		>"$out/tls-vs-plain-$i.json" 2>"$out/tls-vs-plain-$i.log" || echo "   FAILED"
	# The same with the plaintext connections read as TLS ones are (no
	# kernel receive stamps: recvmsg costs the generator more than read).
	echo "== $(date +%T) tls-vs-plain-nostamp-$i"
	"$lt" -spawn "$bin" -tls -no-rxstamp -targets tickwheel -scenarios add,lateness,add,lateness $sizes -json \
		>"$out/nostamp-tls-vs-plain-$i.json" 2>"$out/nostamp-tls-vs-plain-$i.log" || echo "   FAILED"
	if [ -n "$base" ]; then
		order=("$base" "$bin")
		[ $((i % 2)) = 0 ] && order=("$bin" "$base")
		for b in "${order[@]}"; do
			name=$([ "$b" = "$base" ] && echo before || echo after)
			echo "== $(date +%T) plain-$name-$i"
			"$lt" -spawn "$b" -targets tickwheel -scenarios add,lateness,add,lateness $sizes -json \
				>"$out/plain-$name-$i.json" 2>"$out/plain-$name-$i.log" || echo "   FAILED"
		done
	fi
done
