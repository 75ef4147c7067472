#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the PostgreSQL session store tests
# (ARCHITECTURE.md, agentwire-store; ../shared/design/scale-out.md §9).
#
#   scripts/postgres.sh start   installs Debian's `postgresql` with apt-get if
#                               /usr/lib/postgresql/15/bin is missing, runs
#                               initdb as `nobody` (initdb refuses root) in a
#                               fresh temp dir, starts the server listening on a
#                               Unix socket in that dir only (no TCP port, so no
#                               port races), fsync off, waits until it answers,
#                               and prints `export` lines for the caller to
#                               eval: AGENTWIRE_TEST_POSTGRES (a URL
#                               tokio-postgres accepts), POSTGRES_DIR.
#   scripts/postgres.sh start --durable
#                               the same, with synchronous_commit on: a commit
#                               returns once its WAL is written, so a server
#                               killed (pause) keeps every commit it
#                               acknowledged (the outage tests need that; the
#                               others run faster without it).
#   scripts/postgres.sh start --tls
#                               the same, and also listening on 127.0.0.1 with
#                               TLS only (pg_hba refuses plaintext TCP), its
#                               certificate (for DNS name localhost) signed by
#                               a CA made for it; prints POSTGRES_TLS_PORT and
#                               POSTGRES_TLS_CA (the CA's PEM file) too.
#   scripts/postgres.sh stop DIR
#                               stops that cluster (immediate) and removes DIR.
#   scripts/postgres.sh pause DIR
#                               stops that cluster's server (immediate, as a
#                               crash would), keeping its data;
#   scripts/postgres.sh resume DIR
#                               starts it again on the same socket (the outage
#                               tests stop and restart a cluster of their own).
#
# The tests make a database of their own per test (CREATE DATABASE) and drop
# it after, so they run in parallel on one cluster. The server log is
# DIR/pg.log while it runs.
set -euo pipefail
bin="${AGENTWIRE_POSTGRES_BIN:-/usr/lib/postgresql/15/bin}"

install() {
    if [ -x "$bin/initdb" ]; then
        return
    fi
    echo "postgres.sh: installing postgresql with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
    [ -x "$bin/initdb" ] || {
        echo "postgres.sh: no initdb in $bin after installing postgresql" >&2
        exit 1
    }
}

# Runs a command as `nobody` when we are root (initdb and postgres refuse
# root), as ourselves otherwise.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"
    else
        "$@"
    fi
}

start() {
    install
    local dir sync=off tls=""
    case "${1:-}" in
        --durable) sync=on ;;
        --tls) tls=yes ;;
        "") ;;
        *) echo "usage: $0 start [--durable | --tls]" >&2; exit 64 ;;
    esac
    dir="$(mktemp -d /tmp/agentwire-pg.XXXXXX)"
    chmod 0755 "$dir"
    # -k: the socket in $dir; listen_addresses='': no TCP at all. fsync off:
    # a killed server's writes are in the kernel already; only a machine
    # crash would lose them.
    local options="-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=$sync -c full_page_writes=off -c max_connections=300"
    local port=""
    if [ -n "$tls" ]; then
        port="$(free_port)"
        make_certificates "$dir"
        options="-k $dir -c listen_addresses=127.0.0.1 -p $port -c ssl=on -c ssl_cert_file=$dir/tls/server.pem -c ssl_key_file=$dir/tls/server.key -c fsync=off -c synchronous_commit=off -c max_connections=100"
    fi
    echo "$options" >"$dir/server.options"
    if [ "$(id -u)" -eq 0 ]; then
        chown nobody:nogroup "$dir"
    fi
    if ! as_owner "$bin/initdb" -D "$dir/data" -A trust -U agentwire --no-sync -E UTF8 \
        --locale=C >"$dir/initdb.log" 2>&1; then
        echo "postgres.sh: initdb failed:" >&2
        cat "$dir/initdb.log" >&2
        rm -rf "$dir"
        exit 1
    fi
    if [ -n "$tls" ]; then
        # Local sockets as before; TCP with TLS only.
        printf '%s\n' 'local all all trust' 'hostssl all all 127.0.0.1/32 trust' \
            'hostnossl all all 127.0.0.1/32 reject' >"$dir/data/pg_hba.conf"
    fi
    if ! run "$dir"; then
        stop "$dir"
        exit 1
    fi
    echo "export AGENTWIRE_TEST_POSTGRES='postgresql:///postgres?host=$dir${port:+&port=$port}&user=agentwire'"
    echo "export POSTGRES_DIR=$dir"
    if [ -n "$tls" ]; then
        echo "export POSTGRES_TLS_PORT=$port"
        echo "export POSTGRES_TLS_CA=$dir/tls/ca.pem"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# scripts/test-certs.sh's CA and localhost certificate in $1/tls, owned
# by the server's user (PostgreSQL refuses a key others can read).
make_certificates() {
    local tls="$1/tls"
    "$(dirname "$0")/test-certs.sh" "$tls"
    if [ "$(id -u)" -eq 0 ]; then
        chown -R nobody:nogroup "$tls"
    fi
}

# Starts the server of the cluster in $1 and waits until it answers.
run() {
    local dir="$1"
    if ! as_owner "$bin/pg_ctl" -w -t 30 -D "$dir/data" -l "$dir/pg.log" \
        -o "$(cat "$dir/server.options")" \
        start >"$dir/pg_ctl.log" 2>&1; then
        echo "postgres.sh: the server did not start:" >&2
        cat "$dir/pg_ctl.log" "$dir/pg.log" >&2 || true
        return 1
    fi
}

ours() {
    case "$1" in
        /tmp/agentwire-pg.*) ;;
        *) echo "postgres.sh: refusing $1 (not a postgres.sh dir)" >&2; exit 64 ;;
    esac
}

pause() {
    local dir="${1:?usage: postgres.sh pause DIR}"
    ours "$dir"
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
}

resume() {
    local dir="${1:?usage: postgres.sh resume DIR}"
    ours "$dir"
    run "$dir"
}

stop() {
    local dir="${1:?usage: postgres.sh stop DIR}"
    ours "$dir"
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
    start) shift; start "$@" ;;
    stop) shift; stop "$@" ;;
    pause) shift; pause "$@" ;;
    resume) shift; resume "$@" ;;
    install) install ;;
    *) echo "usage: $0 start [--durable | --tls] | stop DIR | pause DIR | resume DIR | install" >&2; exit 64 ;;
esac
