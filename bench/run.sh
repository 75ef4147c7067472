#!/usr/bin/env bash
# The standard benchmarks of agentwire against the bare baseline (issue #7):
# builds release, runs each scenario RUNS times per server (alternating, a
# fresh server process per run) and writes the medians to
# docs/src/benchmark-figures.md, the book's "latest run" page (what the
# figures mean, and what they decided, is docs/src/benchmarks.md).
#
#   bench/run.sh                 # all scenarios, 3 runs each, then the soak (~35 minutes)
#   RUNS=1 DURATION=5s SOAK_DURATION=1m bench/run.sh
#   OUT=/tmp/b.md bench/run.sh
#
# The soak runs once per server (it is long): SOAK_CONNECTIONS connections
# doing 20-chunk turns with SQLite for SOAK_DURATION, the server's RSS
# sampled every 5 s, and once more 5 s after every socket has closed.
#
# Every run is bounded (connections, --duration, --max-turns) and targets
# 127.0.0.1 only. Load generator and servers share the machine; close other
# heavy jobs first for figures that mean something.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
OUT=${OUT:-docs/src/benchmark-figures.md}
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-15000}
STREAM_CONNECTIONS=${STREAM_CONNECTIONS:-1000}
BURST_CONNECTIONS=${BURST_CONNECTIONS:-100}
SOAK_CONNECTIONS=${SOAK_CONNECTIONS:-500}
SOAK_DURATION=${SOAK_DURATION:-10m}

cargo build --release -p agentwire -p agentwire-loadgen
loadgen=target/release/agentwire-loadgen

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

# scenario NAME ARGS...: one comparison, its Markdown section kept for the report.
scenario() {
  local name=$1
  shift
  local args=(compare --runs "$RUNS" --duration "$DURATION" "$@")
  echo "== $name: agentwire-loadgen ${args[*]}" >&2
  {
    echo '```sh'
    echo "target/release/agentwire-loadgen ${args[*]}"
    echo '```'
    echo
    echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
  } >"$work/$name.head"
  if ! "$loadgen" "${args[@]}" --markdown "$work/$name.md" | tee "$work/$name.out"; then
    status=1
  fi
  [ -f "$work/$name.md" ] || printf '### %s\n\n(no result: the run failed)\n' "$name" >"$work/$name.md"
}

scenario idle --scenario idle --connections "$IDLE_CONNECTIONS" --connect-concurrency 128
scenario stream --scenario stream --connections "$STREAM_CONNECTIONS" --chunks 20 --storage sqlite
scenario stream-memory --scenario stream --connections "$STREAM_CONNECTIONS" --chunks 20 --storage memory
scenario script --scenario stream --connections "$STREAM_CONNECTIONS" --storage sqlite
scenario burst --scenario burst --connections "$BURST_CONNECTIONS"
RUNS=1 DURATION=$SOAK_DURATION scenario soak --scenario soak --connections "$SOAK_CONNECTIONS" \
  --chunks 20 --storage sqlite --sample-interval 5s --settle 5s

commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${COMMIT:-}" ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then commit="$commit (with uncommitted changes)"; fi
{
  echo "# The latest run"
  echo
  echo "Measured $(date -u +%Y-%m-%d) by \`bench/run.sh\` at commit $commit:"
  echo "agentwire against the bare baseline of \`agentwire-loadgen baseline-server\`"
  echo "(same runtime, same WebSocket library, same frames; no engine,"
  echo "persistence or protocol checks), medians of $RUNS runs per server, each"
  echo "run on a fresh server process, alternating which server goes first."
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory,"
  echo "$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)."
  echo "The load generator runs on the same cores as the server it measures."
  echo
  echo "How to read the figures: RSS and CPU are the server's, from"
  echo "\`/proc/<pid>/status\` (VmRSS) and \`/proc/<pid>/stat\` (utime + stime, 10 ms"
  echo "ticks), taken before the connections open, once they are open, and at"
  echo "the end of the run phase with every socket still open. CPU per turn and"
  echo "per chunk divide the run phase's CPU time by the turns and chunks"
  echo "completed. Latencies are measured by the client from sending the"
  echo "message; a ratio is agentwire's median over the baseline's."
  echo "The soak runs once per server: its figures are one run's, not medians."
  for name in idle stream stream-memory script burst soak; do
    echo
    sed -n 1p "$work/$name.md"
    echo
    cat "$work/$name.head"
    sed 1,2d "$work/$name.md"
  done
  echo
  echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT"
echo "wrote $OUT" >&2
exit "$status"
