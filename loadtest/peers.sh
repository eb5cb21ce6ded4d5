#!/usr/bin/env bash
# peers.sh — the external peers the load generator compares tickwheel with:
# a Redis server (sorted-set delay queue) and beanstalkd, on loopback only,
# pinned to CPU 0 like a spawned tickwheel server (the generator pins itself
# to CPU 1).
#
#   loadtest/peers.sh start    # install (apt-get, needs root) if missing, then start both
#   loadtest/peers.sh status
#   loadtest/peers.sh stop
#
# Addresses (override with the environment):
#   REDIS_PORT=6390       -> redis-server on 127.0.0.1:6390, no persistence
#   BEANSTALKD_PORT=11390 -> beanstalkd on 127.0.0.1:11390, no binlog
#   PEERS_CPU=0           -> taskset -c PEERS_CPU (skipped when taskset is missing)
# Pid files and logs go to PEERS_DIR (default /tmp/tickwheel-peers); the
# loadtest command finds a peer's pid from its listening socket, or from these
# pid files, to report its CPU seconds and RSS.
set -euo pipefail

REDIS_PORT=${REDIS_PORT:-6390}
BEANSTALKD_PORT=${BEANSTALKD_PORT:-11390}
PEERS_CPU=${PEERS_CPU:-0}
PEERS_DIR=${PEERS_DIR:-/tmp/tickwheel-peers}

log() { echo "peers: $*" >&2; }

pin() {
	if command -v taskset >/dev/null 2>&1; then
		taskset -c "$PEERS_CPU" "$@"
	else
		log "taskset not found: not pinned"
		"$@"
	fi
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

install() {
	local missing=()
	command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
	command -v beanstalkd >/dev/null 2>&1 || missing+=(beanstalkd)
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then
		log "need root to apt-get install ${missing[*]}"
		exit 1
	fi
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# --no-install-recommends: no redis-tools etc.; policy-rc.d keeps the
	# packages' own services (default ports) from being started.
	local prc=/usr/sbin/policy-rc.d had_prc=0
	[ -e $prc ] && had_prc=1
	[ $had_prc = 1 ] || printf '#!/bin/sh\nexit 101\n' >$prc && chmod +x $prc
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	[ $had_prc = 1 ] || rm -f $prc
}

wait_port() { # port
	for _ in $(seq 100); do
		if (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	return 1
}

start() {
	install
	mkdir -p "$PEERS_DIR"
	if alive "$PEERS_DIR/redis.pid"; then
		log "redis already running (pid $(cat "$PEERS_DIR/redis.pid"))"
	else
		pin redis-server --save '' --appendonly no --bind 127.0.0.1 --port "$REDIS_PORT" \
			--protected-mode yes --daemonize yes \
			--pidfile "$PEERS_DIR/redis.pid" --logfile "$PEERS_DIR/redis.log" --dir "$PEERS_DIR"
		wait_port "$REDIS_PORT" || { log "redis did not listen on 127.0.0.1:$REDIS_PORT (see $PEERS_DIR/redis.log)"; exit 1; }
		for _ in $(seq 50); do [ -s "$PEERS_DIR/redis.pid" ] && break; sleep 0.05; done
		log "redis-server pid $(cat "$PEERS_DIR/redis.pid") on 127.0.0.1:$REDIS_PORT"
	fi
	if alive "$PEERS_DIR/beanstalkd.pid"; then
		log "beanstalkd already running (pid $(cat "$PEERS_DIR/beanstalkd.pid"))"
	else
		# exec keeps the pid: $! is beanstalkd itself, not a wrapper.
		nohup bash -c "exec $(command -v taskset >/dev/null && echo "taskset -c $PEERS_CPU") beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" \
			>"$PEERS_DIR/beanstalkd.log" 2>&1 </dev/null &
		echo $! >"$PEERS_DIR/beanstalkd.pid"
		wait_port "$BEANSTALKD_PORT" || { log "beanstalkd did not listen on 127.0.0.1:$BEANSTALKD_PORT (see $PEERS_DIR/beanstalkd.log)"; exit 1; }
		log "beanstalkd pid $(cat "$PEERS_DIR/beanstalkd.pid") on 127.0.0.1:$BEANSTALKD_PORT"
	fi
}

stop_one() { # name
	local f="$PEERS_DIR/$1.pid"
	if alive "$f"; then
		local pid
		pid=$(cat "$f")
		kill "$pid"
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		log "$1 (pid $pid) stopped"
	else
		log "$1 not running"
	fi
	rm -f "$f"
}

status() {
	local rc=0
	for n in redis beanstalkd; do
		local f="$PEERS_DIR/$n.pid" port=$REDIS_PORT
		[ $n = beanstalkd ] && port=$BEANSTALKD_PORT
		if alive "$f"; then
			local pid
			pid=$(cat "$f")
			echo "$n: running, pid $pid, 127.0.0.1:$port, $(taskset -pc "$pid" 2>/dev/null | sed 's/.*: /cpus /')"
		else
			echo "$n: not running"
			rc=1
		fi
	done
	return $rc
}

case "${1:-}" in
start) start ;;
stop) stop_one redis; stop_one beanstalkd ;;
status) status ;;
install) install ;;
*) echo "usage: $0 start|stop|status|install" >&2; exit 2 ;;
esac
