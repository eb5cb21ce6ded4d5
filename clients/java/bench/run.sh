#!/usr/bin/env bash
# The Java client against the Go client, same server, same run:
#   - adds/s with one add in flight (callers 1) and pipelined (callers 128 adds in flight
#     over one connection);
#   - fires/s: N_FIRES one-shot timers over 64 receivers bound by the client, all due on one
#     tick, one fast_forward, until the client has received every fire event; plain (ack
#     none) and acknowledged with automatic acks (ack auto). gobench measures adds too on
#     that run: its line keeps only fires_per_s.
# Builds the server and loadtest/cmd/gobench, starts one frozen in-memory server, and
# alternates the two clients ROUNDS times. Prints one JSON line per run. JAVA_OPTS is
# passed to the Java runs (e.g. -XX:StartFlightRecording=...). BASELINE=<commit> also runs
# the Java client of that commit (its main sources, with this Bench) after each Java run,
# its lines labelled "java@<commit>": before and after a change, in the same run.
#   [BASELINE=<commit>] clients/java/bench/run.sh [ROUNDS] [N_SINGLE] [N_PIPELINED] [N_FIRES]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3} n1=${2:-20000} n128=${3:-200000} nf=${4:-200000}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/tickwheel" ./cmd/tickwheel
(cd loadtest && go build -o "$tmp/gobench" ./cmd/gobench)
(cd clients/java && mvn -q test-compile dependency:build-classpath -Dmdep.outputFile="$tmp/cp.txt")
cp="clients/java/target/classes:clients/java/target/test-classes:$(cat "$tmp/cp.txt")"
if [ -n "${BASELINE:-}" ]; then
  mkdir -p "$tmp/base/src" "$tmp/base/classes"
  git archive "$BASELINE" clients/java/src/main | tar -x -C "$tmp/base/src"
  # shellcheck disable=SC2046 # the sources are paths without spaces, under mktemp
  javac -nowarn -d "$tmp/base/classes" -cp "$(cat "$tmp/cp.txt")" $(find "$tmp/base/src" -name '*.java') \
    clients/java/src/test/java/io/tickwheel/client/Bench.java
  base_cp="$tmp/base/classes:$(cat "$tmp/cp.txt")"
fi
token=$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")
TICKWHEEL_ADMIN_TOKEN="$token" "$tmp/tickwheel" -addr 127.0.0.1:0 -data-dir "" -frozen -log-level warn -http-addr off >"$tmp/out" &
pid=$!
for _ in $(seq 50); do grep -q 'listening on' "$tmp/out" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on //p' "$tmp/out")
# shellcheck disable=SC2086 # JAVA_OPTS is a list of options
java_bench() {
  java ${JAVA_OPTS:-} -cp "$cp" io.tickwheel.client.Bench "$addr" "$token" "$@"
  if [ -n "${BASELINE:-}" ]; then
    java ${JAVA_OPTS:-} -cp "$base_cp" io.tickwheel.client.Bench "$addr" "$token" "$@" | sed "s/\"java\"/\"java@$BASELINE\"/"
  fi
}
for _ in $(seq "$rounds"); do
  for callers in 1 128; do
    n=$n128; [ "$callers" = 1 ] && n=$n1
    "$tmp/gobench" -addr "$addr" -token "$token" -n "$n" -callers "$callers" | sed 's/,"fires_per_s":[0-9]*//'
    java_bench "$n" "$callers"
  done
  for ack in none auto; do
    "$tmp/gobench" -addr "$addr" -token "$token" -n "$nf" -callers 128 -ack "$ack" \
      | sed 's/"adds_per_s":[0-9]*,//; s/"add_rtt_ms":{[^}]*},//'
    java_bench "$nf" 128 fires "$ack"
  done
done
