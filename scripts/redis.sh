#!/usr/bin/env bash
# Starts a throwaway Redis server for the live-state tests (ARCHITECTURE.md,
# agentwire-live; ../shared/design/scale-out.md §9).
#
#   scripts/redis.sh start   installs Debian's `redis-server` with apt-get if
#                            it is missing, starts one on a Unix socket in a
#                            fresh temp dir (no TCP port, so no port races),
#                            keeping nothing on disk, waits until it answers,
#                            and prints `export` lines for the caller to eval:
#                            AGENTWIRE_TEST_REDIS (a URL the redis crate
#                            accepts), AGENTWIRE_TEST_REDIS_SERVER (the
#                            binary, for tests that start a server of their
#                            own), REDIS_DIR.
#   scripts/redis.sh stop DIR
#                            stops that server and removes DIR.
#
# The tests use a key prefix of their own each (never FLUSHALL), so they run
# in parallel on one server. The server log is DIR/redis.log while it runs.
set -euo pipefail

server() {
    command -v redis-server || { [ -x /usr/bin/redis-server ] && echo /usr/bin/redis-server; }
}

install() {
    if [ -n "$(server)" ]; then
        return
    fi
    echo "redis.sh: installing redis-server with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >&2; }
    [ -n "$(server)" ] || {
        echo "redis.sh: no redis-server after installing it" >&2
        exit 1
    }
}

start() {
    install
    local bin dir
    bin="$(server)"
    dir="$(mktemp -d /tmp/agentwire-redis.XXXXXX)"
    if ! "$bin" --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
        --save '' --appendonly no --dir "$dir" --daemonize yes \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >/dev/null 2>&1; then
        echo "redis.sh: the server did not start:" >&2
        cat "$dir/redis.log" >&2 || true
        rm -rf "$dir"
        exit 1
    fi
    for _ in $(seq 1 100); do
        [ -S "$dir/redis.sock" ] && break
        sleep 0.05
    done
    if [ ! -S "$dir/redis.sock" ]; then
        echo "redis.sh: no socket after 5 s:" >&2
        cat "$dir/redis.log" >&2 || true
        stop "$dir"
        exit 1
    fi
    echo "export AGENTWIRE_TEST_REDIS='redis+unix://$dir/redis.sock'"
    echo "export AGENTWIRE_TEST_REDIS_SERVER=$bin"
    echo "export REDIS_DIR=$dir"
}

stop() {
    local dir="${1:?usage: redis.sh stop DIR}"
    case "$dir" in
        /tmp/agentwire-redis.*) ;;
        *) echo "redis.sh: refusing to stop $dir (not a redis.sh dir)" >&2; exit 64 ;;
    esac
    if [ -f "$dir/redis.pid" ]; then
        kill "$(cat "$dir/redis.pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    start) start ;;
    stop) shift; stop "$@" ;;
    install) install ;;
    *) echo "usage: $0 start | stop DIR | install" >&2; exit 64 ;;
esac
