#!/usr/bin/env bash
# Start, stop or restart a node of a throwaway 3-master Redis Cluster on
# 127.0.0.1 for tests.
#
#   .ci/redis-cluster.sh start          # prints IDEM_TEST_REDIS_CLUSTER=...
#   .ci/redis-cluster.sh stop
#   .ci/redis-cluster.sh restart PORT   # starts a killed node again
#   eval "$(.ci/redis-cluster.sh start)"   # exports it into the shell
#
# PORT_BASE (default 7000) picks the ports PORT_BASE..PORT_BASE+2, so a test
# can run a cluster of its own (e.g. PORT_BASE=7100) and kill a master.
#
# Persistence is chosen at start by APPENDONLY (default no) and APPENDFSYNC
# (always, everysec or no; passed only when set). By default nodes run with
# --save '' --appendonly no: they keep nothing on disk beyond their cluster
# config, and a node killed and restarted comes back empty (its slots, kept
# in its cluster config, but none of its keys). With APPENDONLY=yes
# APPENDFSYNC=always a node fsyncs every write to its AOF before it
# answers, and a restarted node reloads everything it acknowledged.
#
# Each node has its own dir, ${TMPDIR:-/tmp}/idem-redis-cluster-PORT_BASE/PORT,
# holding its cluster config and AOF; stop removes it all. start records
# each node's exact arguments, and restart PORT starts that node again with
# them (same cluster config, same dir, same persistence), then waits until
# every node reports cluster_state:ok. restart refuses a node that still
# answers. start is idempotent: a healthy running cluster started with the
# same persistence settings is reused; otherwise it is stopped and
# replaced.
set -euo pipefail

PORT_BASE="${PORT_BASE:-7000}"
APPENDONLY="${APPENDONLY:-no}"
APPENDFSYNC="${APPENDFSYNC:-}"
DIR="${TMPDIR:-/tmp}/idem-redis-cluster-${PORT_BASE}"
REDIS_SERVER="${REDIS_SERVER:-redis-server}"
REDIS_CLI="${REDIS_CLI:-redis-cli}"
PORTS=("$PORT_BASE" "$((PORT_BASE + 1))" "$((PORT_BASE + 2))")
MODE="appendonly=$APPENDONLY appendfsync=${APPENDFSYNC:-default}"

addrs() {
	local out="" p
	for p in "${PORTS[@]}"; do out="${out:+$out,}127.0.0.1:$p"; done
	echo "$out"
}

node_ok() { # port
	"$REDIS_CLI" -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

# cluster_ok: every node answers and reports cluster_state:ok.
cluster_ok() {
	local p
	for p in "${PORTS[@]}"; do node_ok "$p" || return 1; done
}

wait_ping() { # port
	for _ in $(seq 1 100); do
		"$REDIS_CLI" -h 127.0.0.1 -p "$1" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "redis-server on port $1 did not answer PING" >&2
	return 1
}

wait_cluster_ok() {
	for _ in $(seq 1 300); do
		if cluster_ok; then
			echo "IDEM_TEST_REDIS_CLUSTER=$(addrs)"
			return 0
		fi
		sleep 0.1
	done
	echo "redis cluster on ${PORTS[*]} did not reach cluster_state:ok" >&2
	return 1
}

# run_node PORT: starts the node with the arguments start recorded.
run_node() {
	local args=()
	mapfile -d '' args <"$DIR/$1.args"
	"$REDIS_SERVER" "${args[@]}" >/dev/null
}

stop() {
	local p pid
	for p in "${PORTS[@]}"; do
		if [[ -f "$DIR/$p.pid" ]]; then
			pid="$(cat "$DIR/$p.pid")"
			kill -9 "$pid" 2>/dev/null || true
		fi
	done
	rm -rf "$DIR"
}

start() {
	# A cluster started before the mode file existed ran with the defaults.
	local running="appendonly=no appendfsync=default"
	[[ -f "$DIR/mode" ]] && running="$(cat "$DIR/mode")"
	if [[ "$running" == "$MODE" ]] && cluster_ok; then
		echo "IDEM_TEST_REDIS_CLUSTER=$(addrs)"
		return 0
	fi
	stop
	mkdir -p "$DIR"
	echo "$MODE" >"$DIR/mode"
	local p persist=(--save '' --appendonly "$APPENDONLY")
	if [[ -n "$APPENDFSYNC" ]]; then persist+=(--appendfsync "$APPENDFSYNC"); fi
	for p in "${PORTS[@]}"; do
		mkdir -p "$DIR/$p"
		printf '%s\0' --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
			--cluster-config-file "$DIR/$p/nodes.conf" --cluster-node-timeout 2000 \
			"${persist[@]}" --dir "$DIR/$p" --daemonize yes \
			--pidfile "$DIR/$p.pid" --logfile "$DIR/$p.log" >"$DIR/$p.args"
		run_node "$p"
	done
	for p in "${PORTS[@]}"; do wait_ping "$p"; done
	local hosts=()
	for p in "${PORTS[@]}"; do hosts+=("127.0.0.1:$p"); done
	"$REDIS_CLI" --cluster create "${hosts[@]}" --cluster-replicas 0 --cluster-yes >"$DIR/create.log" 2>&1 || {
		cat "$DIR/create.log" >&2
		return 1
	}
	wait_cluster_ok
}

restart() { # port
	local p="${1:-}" known=""
	for known in "${PORTS[@]}"; do [[ "$known" == "$p" ]] && break; known=""; done
	if [[ -z "$known" ]]; then
		echo "restart: port '$p' is not one of ${PORTS[*]}" >&2
		return 2
	fi
	if [[ ! -f "$DIR/$p.args" ]]; then
		echo "restart: no node was started on $p (missing $DIR/$p.args)" >&2
		return 1
	fi
	# A SIGKILLed process may take a moment to let go of its port.
	for _ in $(seq 1 50); do
		"$REDIS_CLI" -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 || break
		sleep 0.1
	done
	if "$REDIS_CLI" -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
		echo "restart: the node on $p is still running; kill it first" >&2
		return 1
	fi
	run_node "$p"
	wait_ping "$p"
	wait_cluster_ok
}

case "${1:-}" in
start) start ;;
stop) stop ;;
restart) restart "${2:-}" ;;
*)
	echo "usage: $0 start|stop|restart PORT" >&2
	exit 2
	;;
esac
