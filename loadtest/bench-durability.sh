#!/usr/bin/env bash
# bench-durability.sh OUT — the runs behind docs/BENCHMARKS.md "Durability".
# From the repository root, as root (peers.sh installs redis-server):
#
#   loadtest/bench-durability.sh /tmp/bench
#
# Every spawned tickwheel keeps its state in a temporary data directory under
# $TMPDIR (removed at exit) or in memory (-persist off): never in the work tree.
# Redis's AOF is switched on at run time (CONFIG SET) and restored after.
# Results: OUT/*.json (loadtest -json), server logs OUT/*.log.*. Only what is
# listed in STEPS runs (default all but t2ab): fsync t1 t2 t3 t4 t4b t4c t4d
# t4m; t2ab (BEFORE=binary) is t2 against an earlier build. The peers (Redis)
# are started only for the steps that use them (t1, t2, t2ab).
# `uptime` is appended to OUT/uptime.txt before and after every step (the
# machine's load, for the record).
set -euo pipefail
OUT=${1:?usage: $0 OUTDIR}
STEPS=${STEPS:-fsync t1 t2 t3 t4 t4b t4c t4d t4m}
REPS=${REPS:-3}
mkdir -p "$OUT"
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root/loadtest" && go build -o /tmp/loadtest ./cmd/loadtest)
(cd "$root" && go build -o /tmp/tickwheel ./cmd/tickwheel)
case " $STEPS " in *" t1 "* | *" t2 "* | *" t2ab "*) "$root/loadtest/peers.sh" start ;; esac
cd "$OUT" # the loadtest writes nothing here but its results
L="/tmp/loadtest -spawn /tmp/tickwheel -redis 127.0.0.1:6390 -json"
cat >"$OUT/big.yaml" <<'EOF'
limits:
  max_timers: 20000000
EOF
# Since c93ea50 snapshots are at least snapshot.min_interval (default 10s)
# apart: the configs that force snapshots say which interval they measure.
# Back to back (min_interval < 0: none) is a stress case, not a production
# setting; snap2s is one snapshot about every 2 s; snapdef the default 10s.
cat >"$OUT/snapoften.yaml" <<'EOF'
snapshot:
  every_records: 100
  min_interval: -1s
EOF
cat >"$OUT/snap2s.yaml" <<'EOF'
snapshot:
  every_records: 100
  min_interval: 2s
EOF
cat >"$OUT/snapdef.yaml" <<'EOF'
snapshot:
  every_records: 100
EOF
cat >"$OUT/nosnap.yaml" <<'EOF'
snapshot:
  every_records: 100000000
  every_bytes: 100000000000
EOF

for step in $STEPS; do
	echo "before $step: $(uptime)" | tee -a "$OUT/uptime.txt"
	case $step in
	fsync) # the disk's fsync latency: 1 KiB writes with O_DSYNC
		for i in $(seq "$REPS"); do
			dd if=/dev/zero of="$OUT/dd.tmp" bs=1k count=2000 oflag=dsync 2>&1 | tail -1
		done | tee "$OUT/fsync.txt"
		rm -f "$OUT/dd.tmp" ;;
	t1) # pipelined adds: in-memory vs fsync everysec; Redis without AOF vs AOF everysec
		for i in $(seq "$REPS"); do
			$L -persist off,everysec -redis-aof ,everysec -targets tickwheel,redis \
				-scenarios add,add,add,add,add -n 1000000 >"$OUT/t1-$i.json" 2>"$OUT/t1-$i.err"
		done ;;
	t2) # 64 callers, one request outstanding each: fsync always vs Redis appendfsync always
		for i in $(seq "$REPS"); do
			$L -persist off,always -redis-aof ,always -targets tickwheel,redis -scenarios add,add,add \
				-n 20000 -c 64 -window 1 >"$OUT/t2-c64w1-$i.json" 2>"$OUT/t2-c64w1-$i.err"
			$L -persist off,always -redis-aof ,always -targets tickwheel,redis -scenarios add,add,add \
				-n 50000 -c 8 -window 8 >"$OUT/t2-c8w8-$i.json" 2>"$OUT/t2-c8w8-$i.err"
			$L -persist off,always -redis-aof ,always -targets tickwheel,redis -scenarios add,add,add \
				-n 50000 -c 1 -window 64 >"$OUT/t2-c1w64-$i.json" 2>"$OUT/t2-c1w64-$i.err"
		done ;;
	t2ab) # t2 with two builds interleaved: /tmp/tickwheel and $BEFORE (a tickwheel
		# binary), each run waiting up to 60 s for a quieter machine (no compiler or
		# test binary running, 1-minute load < 1.5). Results OUT/{after,before}-t2-*.json.
		: "${BEFORE:?t2ab needs BEFORE=<a tickwheel binary to compare with>}"
		for i in $(seq "$REPS"); do
			for w in $(seq 60); do
				l=$(cut -d' ' -f1 /proc/loadavg)
				if ! pgrep -x compile >/dev/null && ! pgrep -f '\.test( |$)' >/dev/null &&
					awk "BEGIN{exit !($l < 1.5)}"; then break; fi
				sleep 1
			done
			for b in after before; do
				bin=/tmp/tickwheel
				[ "$b" = before ] && bin=$BEFORE
				echo "$b $i: $(uptime)" >>"$OUT/uptime.txt"
				LL="/tmp/loadtest -spawn $bin -redis 127.0.0.1:6390 -json -persist off,always -redis-aof ,always -targets tickwheel,redis -scenarios add,add,add"
				$LL -n 20000 -c 64 -window 1 >"$OUT/$b-t2-c64w1-$i.json" 2>"$OUT/$b-t2-c64w1-$i.err"
				$LL -n 50000 -c 8 -window 8 >"$OUT/$b-t2-c8w8-$i.json" 2>"$OUT/$b-t2-c8w8-$i.err"
				$LL -n 50000 -c 1 -window 64 >"$OUT/$b-t2-c1w64-$i.json" 2>"$OUT/$b-t2-c1w64-$i.err"
			done
		done ;;
	t3) # recovery of 10M timers: graceful (snapshot) and crash (snapshot + 1M adds of log)
		for i in $(seq "$REPS"); do
			$L -scenarios recover -n 10000000 -tail 1000000 -server-config "$OUT/big.yaml" \
				-server-log "$OUT/t3-$i.log" >"$OUT/t3-$i.json" 2>"$OUT/t3-$i.err"
		done ;;
	t4) # lateness at 50k fires/s with 1M long timers held, snapshots back to back vs none
		for i in $(seq "$REPS"); do
			order="everysec:$OUT/snapoften.yaml,everysec:$OUT/nosnap.yaml"
			[ $((i % 2)) = 0 ] && order="everysec:$OUT/nosnap.yaml,everysec:$OUT/snapoften.yaml"
			$L -persist "$order" -preload 1000000 -targets tickwheel -scenarios lateness,lateness \
				-rate 50000 -duration 5s -lead 2s -grace 10s -server-log "$OUT/t4-$i.log" \
				>"$OUT/t4-$i.json" 2>"$OUT/t4-$i.err"
		done ;;
	t4b | t4c) # the same with a snapshot every ~2 s (t4b), or at the default min_interval of 10 s (t4c)
		cfg=snap2s
		[ "$step" = t4c ] && cfg=snapdef
		for i in $(seq "$REPS"); do
			order="everysec:$OUT/$cfg.yaml,everysec:$OUT/nosnap.yaml"
			[ $((i % 2)) = 0 ] && order="everysec:$OUT/nosnap.yaml,everysec:$OUT/$cfg.yaml"
			$L -persist "$order" -preload 1000000 -targets tickwheel -scenarios lateness,lateness \
				-rate 50000 -duration 5s -lead 2s -grace 10s -server-log "$OUT/$step-$i.log" \
				>"$OUT/$step-$i.json" 2>"$OUT/$step-$i.err"
		done ;;
	t4d) # the default min_interval with 12 s plans, three per server: about one snapshot per plan
		# (the first after the preload, whose Freeze allocates the copy, often falls in the first plan)
		for i in $(seq "$REPS"); do
			order="everysec:$OUT/snapdef.yaml,everysec:$OUT/nosnap.yaml"
			[ $((i % 2)) = 0 ] && order="everysec:$OUT/nosnap.yaml,everysec:$OUT/snapdef.yaml"
			$L -persist "$order" -preload 1000000 -targets tickwheel -scenarios lateness,lateness,lateness \
				-rate 50000 -duration 12s -lead 2s -grace 10s -server-log "$OUT/$step-$i.log" \
				>"$OUT/$step-$i.json" 2>"$OUT/$step-$i.err"
		done ;;
	t4m) # no snapshots: in memory (one P) against fsync everysec (a durable server gets two Ps since
		# c6025f3), interleaved, three 5 s plans each, 1M long timers held as in t4
		for i in $(seq "$REPS"); do
			order="off,everysec:$OUT/nosnap.yaml"
			[ $((i % 2)) = 0 ] && order="everysec:$OUT/nosnap.yaml,off"
			$L -persist "$order" -preload 1000000 -targets tickwheel -scenarios lateness,lateness,lateness \
				-rate 50000 -duration 5s -lead 2s -grace 10s -server-log "$OUT/$step-$i.log" \
				>"$OUT/$step-$i.json" 2>"$OUT/$step-$i.err"
		done ;;
	*) echo "unknown step $step" >&2; exit 2 ;;
	esac
	echo "after $step: $(uptime)" | tee -a "$OUT/uptime.txt"
done
