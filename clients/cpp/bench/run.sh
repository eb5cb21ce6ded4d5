#!/usr/bin/env bash
# The C++ client against the Go client, same server, same run: builds the
# server, loadtest/cmd/gobench and clients/cpp's tickwheel_bench (Release),
# starts one frozen in-memory server and alternates the clients ROUNDS times
# (default 3). Each prints one JSON line:
#   gobench -callers 1     adds/s one at a time, and fires/s
#   gobench -callers 1000  adds/s pipelined (1000 in flight), and fires/s
#   tickwheel_bench        adds/s one at a time and pipelined (batches of
#                          1000), and fires/s
# fires/s is N one-shot timers over 64 receivers bound by the one client,
# all due on one tick, fast-forwarded over, every event received.
#   clients/cpp/bench/run.sh [ROUNDS] [N]
set -euo pipefail
cd "$(dirname "$0")/../../.."
rounds=${1:-3} n=${2:-20000}
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/tickwheel" ./cmd/tickwheel
(cd loadtest && go build -o "$tmp/gobench" ./cmd/gobench)
cmake -S clients/cpp -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/build" -j2 --target tickwheel_bench >/dev/null
token=$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")
TICKWHEEL_ADMIN_TOKEN="$token" "$tmp/tickwheel" -addr 127.0.0.1:0 -data-dir "" -frozen -log-level warn -http-addr off >"$tmp/out" &
pid=$!
for _ in $(seq 50); do grep -q 'listening on' "$tmp/out" && break; sleep 0.1; done
addr=$(sed -n 's/.*listening on //p' "$tmp/out")
for _ in $(seq "$rounds"); do
  "$tmp/gobench" -addr "$addr" -token "$token" -n "$n" -callers 1
  "$tmp/gobench" -addr "$addr" -token "$token" -n "$n" -callers 1000
  "$tmp/build/tickwheel_bench" "$addr" "$token" "$n"
done
