#!/usr/bin/env bash
# Bytes on the wire and server CPU per streamed turn, with and without
# permessage-deflate, in one sitting: the loadgen's `stream` shape (the
# `bench` agent's mock model streams CHUNKS 20-character chunks per turn,
# memory storage) on CONNECTIONS Omnia sockets doing TURNS turns each,
# driven by a client that negotiates compression as browsers do (Python's
# websockets, bench/compression_client.py). Each mode runs on a fresh
# server process; the bytes on the wire are counted by the client at its
# sockets (TCP payload both ways, framing and handshakes included), the
# server's CPU comes from /proc/PID/stat.
#
#   bench/compression.sh                      # release build, 50 x 40 turns, 20 chunks
#   PROFILE=debug CONNECTIONS=20 TURNS=20 bench/compression.sh
#
# Needs target/clients-venv (scripts/install-test-deps.sh). Bounded (a fixed
# number of turns) and on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-release}
CONNECTIONS=${CONNECTIONS:-50}
TURNS=${TURNS:-40}
CHUNKS=${CHUNKS:-20}
python=target/clients-venv/bin/python
[ -x "$python" ] || { echo "compression.sh: run scripts/install-test-deps.sh first" >&2; exit 1; }

if [ "$PROFILE" = release ]; then cargo build -q --release -p agentwire; else cargo build -q -p agentwire; fi
binary="${CARGO_TARGET_DIR:-target}/$PROFILE/agentwire"
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
reply=$(python3 -c "import sys; print(''.join('<%018d>' % i for i in range(int(sys.argv[1]))))" "$CHUNKS")
ticks=$(getconf CLK_TCK)

# run MODE COMPRESSION_ENABLED OFFER: one fresh server, one client run.
run() {
    local mode=$1 enabled=$2 offer=$3 port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$work/config.yaml" <<YAML
server:
  listen: 127.0.0.1:$port
  limits:
    max_connections: $((CONNECTIONS + 100))
    messages_per_second: 1000000
    message_burst: 1000000
  websocket:
    compression:
      enabled: $enabled
storage:
  sessions: memory
  media:
    backend: none
providers:
  - name: bench
    type: mock
    default_response: "$reply"
agents:
  - name: bench
    handler: runtime
    provider: bench
YAML
    RUST_LOG=warn "$binary" serve --config "$work/config.yaml" 2>"$work/$mode.log" &
    server=$!
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
        sleep 0.1
    done
    cpu0=$(awk '{print $14 + $15}' "/proc/$server/stat")
    local out
    out=$("$python" bench/compression_client.py "ws://127.0.0.1:$port/ws?agent=bench" \
        "$CONNECTIONS" "$TURNS" "$offer")
    cpu1=$(awk '{print $14 + $15}' "/proc/$server/stat")
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    python3 - "$mode" "$out" "$((cpu1 - cpu0))" "$ticks" <<'PY'
import json, sys
mode, out, cpu, ticks = sys.argv[1], json.loads(sys.argv[2]), *map(int, sys.argv[3:])
turns = out["turns"]
print(f"| {mode} | {out['extensions'] or '(none)'} | {turns} | {out['chunks'] / turns:.0f} | "
      f"{out['received'] / turns:.0f} | {out['sent'] / turns:.0f} | "
      f"{cpu / ticks * 1e6 / turns:.0f} | {out['seconds']} |")
PY
}

echo "$PROFILE build, $CONNECTIONS connections x $TURNS turns, $CHUNKS chunks per turn, $(nproc) cores"
echo
echo "| mode | negotiated | turns | chunks per turn | bytes to the client per turn | bytes from it | server CPU µs per turn | seconds |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
run plain false none
run deflate true deflate
