#!/usr/bin/env bash
# One agentwire process at this machine's connection ceiling (issue 36):
# CONNECTIONS idle sockets, then CONNECTIONS sockets of which ACTIVE stream
# CHUNKS-chunk turns back to back (the rest silent), each on a fresh server
# with SQLite, the load generator spread over PROCESSES processes. Besides
# the load generator's figures (RSS, CPU per turn, first-chunk and turn
# percentiles) it samples, with every socket open, the kernel's side:
# /proc/net/sockstat (TCP buffer pages), the slab memory of /proc/meminfo,
# and `ss -tm` for the server's sockets. Writes Markdown to OUT.
#
#   bench/connections.sh                              # 19,000 and 190 of them streaming
#   CONNECTIONS=5000 ACTIVE=50 DURATION=10s bench/connections.sh
#   AGENTWIRE_BIN=/tmp/agentwire-old OUT=/tmp/c.md bench/connections.sh
#
# The server and the load generator share the machine (and its loopback:
# both ends of every socket are counted in the kernel figures). The open
# file limit must allow CONNECTIONS plus a margin in one process: raise it
# first (`ulimit -n`, LimitNOFILE=, fs.nr_open; docs/src/sizing.md). Not run
# in CI: it takes a few minutes and most of the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${CONNECTIONS:-19000}
ACTIVE=${ACTIVE:-$((CONNECTIONS / 100))}
CHUNKS=${CHUNKS:-20}
DURATION=${DURATION:-20s}
PROCESSES=${PROCESSES:-4}
OUT=${OUT:-/dev/stdout}
AGENTWIRE_BIN=${AGENTWIRE_BIN:-target/release/agentwire}
LOADGEN=${LOADGEN:-target/release/agentwire-loadgen}

[[ ${SKIP_BUILD:-} ]] || cargo build --release -q -p agentwire -p agentwire-loadgen
ulimit -n "$(ulimit -Hn)"
if (($(ulimit -n) < CONNECTIONS + 200)); then
  echo "the open file limit $(ulimit -n) is below $CONNECTIONS connections + 200" >&2
  exit 2
fi

work=$(mktemp -d)
server_pid=
stop_server() {
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
trap 'stop_server; rm -rf "$work"' EXIT

reply=$(for ((i = 0; i < CHUNKS; i++)); do printf '<%018d>' "$i"; done)
cat >"$work/agentwire.yaml" <<YAML
server:
  listen: 127.0.0.1:0
  limits:
    max_connections: $((CONNECTIONS + 1000))
    messages_per_second: 1000000
    message_burst: 1000000
storage:
  sessions: "sqlite://$work/bench.db"
providers:
  - name: bench
    type: mock
    default_response: "$reply"
agents:
  - name: test-agent
    handler: test
  - name: bench
    handler: runtime
    provider: bench
YAML

# start_server: a fresh agentwire on a fresh database; sets server_pid, port.
start_server() {
  rm -f "$work"/bench.db*
  "$AGENTWIRE_BIN" serve --config "$work/agentwire.yaml" 2>"$work/server.log" &
  server_pid=$!
  port=
  for _ in $(seq 200); do
    port=$(grep -o 'address=127.0.0.1:[0-9]*' "$work/server.log" | head -1 | cut -d: -f2 || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { echo "agentwire did not start" >&2; cat "$work/server.log" >&2; exit 1; }
}

# kernel_sample LABEL: the kernel's socket memory now, as Markdown lines.
kernel_sample() {
  local slab tcp_pages ss_sum
  slab=$(awk '/^Slab:/ {print $2}' /proc/meminfo)
  tcp_pages=$(awk '/^TCP:/ {for (i = 1; i < NF; i++) if ($i == "mem") print $(i + 1)}' /proc/net/sockstat)
  ss_sum=$(ss -tmnH state established "( sport = :$port )" 2>/dev/null |
    grep -o 'skmem:([^)]*)' |
    awk -F'[(,)]' '{for (i = 2; i < NF; i++) {k = $i; gsub(/[0-9]/, "", k); v = $i; gsub(/[^0-9]/, "", v); s[k] += v}; n++}
      END {printf "%d server sockets; summed: rmem_alloc %d B, wmem_alloc %d B, fwd_alloc %d B, wmem_queued %d B, rcvbuf %d B, sndbuf %d B", n, s["r"], s["t"], s["f"], s["w"], s["rb"], s["tb"]}')
  echo "- $1: slab $slab KiB; TCP buffer pages (sockstat mem) $tcp_pages; $ss_sum"
}

# measure NAME ARGS...: one run against a fresh server, the kernel sampled
# once every socket is open.
measure() {
  local name=$1
  shift
  start_server
  local before
  before=$(kernel_sample "before connecting")
  "$LOADGEN" run --target "127.0.0.1:$port" --server-pid "$server_pid" --label agentwire \
    --connections "$CONNECTIONS" --processes "$PROCESSES" --duration "$DURATION" \
    --connect-concurrency 128 "$@" >"$work/$name.out" 2>&1 &
  local loadgen=$!
  # Every socket open: the server holds that many more descriptors.
  for _ in $(seq 600); do
    (($(ls /proc/"$server_pid"/fd | wc -l) >= CONNECTIONS)) && break
    sleep 0.5
  done
  sleep 2
  local during
  during=$(kernel_sample "with $CONNECTIONS connections open")
  local status=0
  wait "$loadgen" || status=$?
  stop_server
  {
    echo "### $name"
    echo
    echo '```sh'
    echo "agentwire-loadgen run --connections $CONNECTIONS --processes $PROCESSES --duration $DURATION --connect-concurrency 128 $*"
    echo '```'
    echo
    echo "Load average before: $load_before; exit status $status"
    echo
    echo '```text'
    grep -v '^{' "$work/$name.out"
    echo '```'
    echo
    echo "$before"
    echo "$during"
    echo
    echo '```json'
    grep '^{' "$work/$name.out" || true
    echo '```'
    echo
  } >>"$work/report.md"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
measure idle --scenario idle
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
measure "streaming $ACTIVE of $CONNECTIONS" --scenario stream --active "$ACTIVE" --chunks "$CHUNKS"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "## $CONNECTIONS connections on one process"
  echo
  echo "Measured $(date -u +%Y-%m-%d) by \`bench/connections.sh\` at $commit ($AGENTWIRE_BIN),"
  echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); open file limit $(ulimit -n)."
  echo
  cat "$work/report.md"
} >"$OUT"
