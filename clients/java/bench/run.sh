#!/usr/bin/env bash
# The Java client against the Go client, same server, same run: adds/s with one add in
# flight (callers 1) and pipelined (callers 128 adds in flight over one connection).
# Builds the server and loadtest/cmd/gobench, starts one frozen in-memory server, and
# alternates the two clients ROUNDS times. Prints one JSON line per run.
#   clients/java/bench/run.sh [ROUNDS] [N_SINGLE] [N_PIPELINED]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3} n1=${2:-20000} n128=${3:-200000}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/tickwheel" ./cmd/tickwheel
(cd loadtest && go build -o "$tmp/gobench" ./cmd/gobench)
(cd clients/java && mvn -q test-compile dependency:build-classpath -Dmdep.outputFile="$tmp/cp.txt")
cp="clients/java/target/classes:clients/java/target/test-classes:$(cat "$tmp/cp.txt")"
token=$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")
TICKWHEEL_ADMIN_TOKEN="$token" "$tmp/tickwheel" -addr 127.0.0.1:0 -data-dir "" -frozen -log-level warn -http-addr off >"$tmp/out" &
pid=$!
for _ in $(seq 50); do grep -q 'listening on' "$tmp/out" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on //p' "$tmp/out")
for _ in $(seq "$rounds"); do
  for callers in 1 128; do
    n=$n128; [ "$callers" = 1 ] && n=$n1
    "$tmp/gobench" -addr "$addr" -token "$token" -n "$n" -callers "$callers" | sed 's/,"fires_per_s":[0-9]*//'
    java -cp "$cp" io.tickwheel.client.Bench "$addr" "$token" "$n" "$callers"
  done
done
