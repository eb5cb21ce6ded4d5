#!/usr/bin/env bash
# bench-tls.sh OUTDIR [BASE_BIN] — the TLS figures of docs/BENCHMARKS.md
# ("TLS on the client port"): adds/s and fire lateness with TLS against
# plaintext in the same run (-tls spawns both), three rounds; and, when
# BASE_BIN (a tickwheel built before TLS) is given, plaintext before against
# after, interleaved, three rounds each. Run from the repository root.
set -euo pipefail
out=${1:?usage: loadtest/bench-tls.sh OUTDIR [BASE_BIN]}
base=${2:-}
mkdir -p "$out"
bin=$out/tickwheel lt=$out/loadtest
go build -o "$bin" ./cmd/tickwheel
(cd loadtest && go build -o "$lt" ./cmd/loadtest)
sizes="-n 200000 -rate 20000 -duration 5s -lead 2s -grace 10s"
for i in 1 2 3; do
	echo "== $(date +%T) tls-vs-plain-$i"
	"$lt" -spawn "$bin" -tls -targets tickwheel -scenarios add,lateness,add,lateness $sizes -json \
		>"$out/tls-vs-plain-$i.json" 2>"$out/tls-vs-plain-$i.log" || echo "   FAILED"
	if [ -n "$base" ]; then
		for b in "$base" "$bin"; do
			name=$([ "$b" = "$base" ] && echo before || echo after)
			echo "== $(date +%T) plain-$name-$i"
			"$lt" -spawn "$b" -targets tickwheel -scenarios add,lateness,add,lateness $sizes -json \
				>"$out/plain-$name-$i.json" 2>"$out/plain-$name-$i.log" || echo "   FAILED"
		done
	fi
done
