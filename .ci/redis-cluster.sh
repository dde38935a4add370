#!/usr/bin/env bash
# Start or stop a throwaway 3-master Redis Cluster on 127.0.0.1 for tests.
#
#   .ci/redis-cluster.sh start   # prints IDEM_TEST_REDIS_CLUSTER=...
#   .ci/redis-cluster.sh stop
#   eval "$(.ci/redis-cluster.sh start)"   # exports it into the shell
#
# PORT_BASE (default 7000) picks the ports PORT_BASE..PORT_BASE+2, so a test
# can run a cluster of its own (e.g. PORT_BASE=7100) and kill a master.
# Nodes keep nothing on disk beyond their cluster config, in a temp dir
# that stop removes. start is idempotent: a healthy running cluster is reused.
set -euo pipefail

PORT_BASE="${PORT_BASE:-7000}"
DIR="${TMPDIR:-/tmp}/idem-redis-cluster-${PORT_BASE}"
REDIS_SERVER="${REDIS_SERVER:-redis-server}"
REDIS_CLI="${REDIS_CLI:-redis-cli}"
PORTS=("$PORT_BASE" "$((PORT_BASE + 1))" "$((PORT_BASE + 2))")

addrs() {
	local out="" p
	for p in "${PORTS[@]}"; do out="${out:+$out,}127.0.0.1:$p"; done
	echo "$out"
}

cluster_ok() {
	"$REDIS_CLI" -h 127.0.0.1 -p "${PORTS[0]}" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
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
	if cluster_ok; then
		echo "IDEM_TEST_REDIS_CLUSTER=$(addrs)"
		return 0
	fi
	stop
	mkdir -p "$DIR"
	local p
	for p in "${PORTS[@]}"; do
		"$REDIS_SERVER" --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
			--cluster-config-file "$DIR/nodes-$p.conf" --cluster-node-timeout 2000 \
			--save '' --appendonly no --dir "$DIR" --daemonize yes \
			--pidfile "$DIR/$p.pid" --logfile "$DIR/$p.log" >/dev/null
	done
	for p in "${PORTS[@]}"; do
		for _ in $(seq 1 100); do
			"$REDIS_CLI" -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 && break
			sleep 0.1
		done
	done
	local hosts=()
	for p in "${PORTS[@]}"; do hosts+=("127.0.0.1:$p"); done
	"$REDIS_CLI" --cluster create "${hosts[@]}" --cluster-replicas 0 --cluster-yes >"$DIR/create.log" 2>&1 || {
		cat "$DIR/create.log" >&2
		return 1
	}
	for _ in $(seq 1 200); do
		if cluster_ok; then
			echo "IDEM_TEST_REDIS_CLUSTER=$(addrs)"
			return 0
		fi
		sleep 0.1
	done
	echo "redis cluster on ${PORTS[*]} did not reach cluster_state:ok" >&2
	return 1
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
