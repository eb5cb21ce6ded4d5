#!/usr/bin/env bash
# The TypeScript client against the Go client, same server, same run:
# builds the server and loadtest/cmd/gobench, starts one frozen
# in-memory server, and alternates the two clients ROUNDS times (default 3)
# for each ack mode. Prints one JSON line per run.
#   clients/typescript/bench/run.sh [ROUNDS] [N] [CALLERS]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3} n=${2:-200000} callers=${3:-128}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/tickwheel" ./cmd/tickwheel
(cd loadtest && go build -o "$tmp/gobench" ./cmd/gobench)
(cd clients/typescript && npm run build >/dev/null)
token=$(od -An -N16 -tx1 /dev/urandom | tr -d " \n") # 32 hex digits: tokens are at least 16 bytes
TICKWHEEL_ADMIN_TOKEN="$token" "$tmp/tickwheel" -addr 127.0.0.1:0 -data-dir "" -frozen -log-level warn >"$tmp/out" &
pid=$!
for _ in $(seq 50); do grep -q 'listening on' "$tmp/out" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on //p' "$tmp/out")
for _ in $(seq "$rounds"); do
  for ack in none auto; do
    "$tmp/gobench" -addr "$addr" -token "$token" -n "$n" -callers "$callers" -ack "$ack"
    node clients/typescript/dist/bench/bench.js "$addr" "$token" "$n" "$callers" "$ack"
  done
done
