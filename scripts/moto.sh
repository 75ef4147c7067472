#!/usr/bin/env bash
# Starts a local S3-compatible server (moto, from PyPI) for the S3 media tests.
#
#   scripts/moto.sh start   installs moto into target/moto-venv if missing, starts
#                           it on 127.0.0.1 on a free port, waits until it answers,
#                           and prints `export` lines for the caller to eval:
#                           AGENTWIRE_TEST_S3_ENDPOINT, AWS_ACCESS_KEY_ID,
#                           AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, MOTO_PID.
#   scripts/moto.sh stop PID
#
# Needs python3 (with venv) and access to PyPI on first use. Logs go to
# target/moto.log.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/target/moto-venv"
log="$root/target/moto.log"

install() {
    if [ -x "$venv/bin/moto_server" ]; then
        return
    fi
    mkdir -p "$root/target"
    echo "moto.sh: installing moto[server] into $venv" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]>=5,<6' >&2
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
    install
    local port pid
    port="$(free_port)"
    # setsid: its own process group, so `stop` ends moto and nothing else.
    setsid "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 </dev/null &
    pid=$!
    for _ in $(seq 1 100); do
        if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/moto-api/', timeout=1)" 2>/dev/null; then
            echo "export AGENTWIRE_TEST_S3_ENDPOINT=http://127.0.0.1:$port"
            echo "export AWS_ACCESS_KEY_ID=\${AWS_ACCESS_KEY_ID:-testing}"
            echo "export AWS_SECRET_ACCESS_KEY=\${AWS_SECRET_ACCESS_KEY:-testing}"
            echo "export AWS_DEFAULT_REGION=\${AWS_DEFAULT_REGION:-us-east-1}"
            echo "export MOTO_PID=$pid"
            return
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "moto.sh: moto_server exited; see $log" >&2
            cat "$log" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "moto.sh: moto_server did not answer on port $port within 10 s; see $log" >&2
    kill -- "-$pid" 2>/dev/null || true
    exit 1
}

stop() {
    local pid="${1:?usage: moto.sh stop PID}"
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
}

case "${1:-}" in
    start) start ;;
    stop) shift; stop "$@" ;;
    install) install ;;
    *) echo "usage: $0 start | stop PID | install" >&2; exit 64 ;;
esac
