#!/usr/bin/env bash
# Several replicas over PostgreSQL and Redis (issue #14), beside one node:
# the `stream` scenario (K-chunk turns from the mock model) against
#
#   sqlite      one agentwire on SQLite, no services (the embedded default)
#   pg-1        one agentwire on PostgreSQL + Redis (`live: redis://…`)
#   pg-2        two agentwire replicas on the same PostgreSQL + Redis, the
#               connections split between them (one load generator per
#               replica, started together)
#
# Each server is a fresh child process per run; the runs alternate. It
# reports turns/s (summed over the replicas) and server CPU per turn (the
# replicas' CPU summed over their turns), the medians of RUNS runs. PostgreSQL
# and Redis are throwaway instances (scripts/postgres.sh, scripts/redis.sh),
# their CPU not counted: it is the same for one replica or two.
#
#   bench/replicas.sh                      # 3 runs of 10 s, 200 connections
#   RUNS=1 DURATION=5s CONNECTIONS=100 bench/replicas.sh
#   OUT=/tmp/replicas.md bench/replicas.sh # also write the Markdown table
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-200}
CHUNKS=${CHUNKS:-20}
OUT=${OUT:-}
BIN=${AGENTWIRE_BIN:-target/release/agentwire}
LOADGEN=${LOADGEN:-target/release/agentwire-loadgen}

if [ -z "${AGENTWIRE_BIN:-}" ]; then
    cargo build --release -p agentwire -p agentwire-loadgen
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -n "${REDIS_DIR:-}" ] && scripts/redis.sh stop "$REDIS_DIR"
    [ -n "${POSTGRES_DIR:-}" ] && scripts/postgres.sh stop "$POSTGRES_DIR"
    rm -rf "$work"
}
trap cleanup EXIT
postgres_env="$(scripts/postgres.sh start)"
eval "$postgres_env"
redis_env="$(scripts/redis.sh start)"
eval "$redis_env"

# The reply `compare` gives the mock model: K chunks of 20 characters.
reply=$(python3 -c "print(''.join(f'<{i:018}>' for i in range($CHUNKS)))")

# config NAME SESSIONS [LIVE]: a benchmark config like `compare`'s.
config() {
    local name=$1 sessions=$2 live=${3:-}
    {
        printf 'server:\n  listen: 127.0.0.1:0\n  limits:\n    max_connections: %d\n' $((CONNECTIONS + 1000))
        printf '    messages_per_second: 1000000\n    message_burst: 1000000\n'
        printf 'storage:\n  sessions: "%s"\n' "$sessions"
        if [ -n "$live" ]; then
            printf 'live: "%s"\nredis:\n  key_prefix: "bench-%s-%s:"\n' "$live" "$name" "$RANDOM$RANDOM"
        fi
        printf 'providers:\n  - name: bench\n    type: mock\n    default_response: "%s"\n' "$reply"
        printf 'agents:\n  - name: bench\n    handler: runtime\n    provider: bench\n'
    } >"$work/$name.yaml"
}

# start NAME: one server; prints "pid address".
start() {
    local log="$work/$1.$RANDOM.log"
    NO_COLOR=1 "$BIN" serve --config "$work/$1.yaml" --listen 127.0.0.1:0 2>"$log" >/dev/null &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 1 200); do
        local address
        address=$(grep -o 'agentwire listening.*address=[^ ]*' "$log" 2>/dev/null | sed 's/.*address=//' | head -1)
        if [ -n "$address" ]; then
            echo "$pid $address"
            return
        fi
        sleep 0.05
    done
    echo "replicas.sh: $1 did not start:" >&2
    cat "$log" >&2
    exit 1
}

# measure NAME REPLICAS: one run; appends one JSON line per replica to NAME.runs.
measure() {
    local name=$1 replicas=$2 each=$(($CONNECTIONS / $2))
    local servers=() loads=()
    for _ in $(seq 1 "$replicas"); do servers+=("$(start "$name")"); done
    for server in "${servers[@]}"; do
        read -r pid address <<<"$server"
        "$LOADGEN" run --target "$address" --server-pid "$pid" --label "$name" \
            --scenario stream --connections "$each" --chunks "$CHUNKS" \
            --duration "$DURATION" >"$work/load.$pid" &
        loads+=($!)
    done
    for load in "${loads[@]}"; do wait "$load" || true; done
    for server in "${servers[@]}"; do
        read -r pid _ <<<"$server"
        tail -1 "$work/load.$pid" >>"$work/$name.runs"
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "$(date +%T) $name run done" >&2
}

config sqlite "sqlite://$work/bench.db"
config pg-1 "$AGENTWIRE_TEST_POSTGRES" "$AGENTWIRE_TEST_REDIS"
config pg-2 "$AGENTWIRE_TEST_POSTGRES" "$AGENTWIRE_TEST_REDIS"
for run in $(seq 1 "$RUNS"); do
    if [ $((run % 2)) -eq 1 ]; then order="sqlite pg-1 pg-2"; else order="pg-2 pg-1 sqlite"; fi
    for name in $order; do
        case $name in
        pg-2) measure "$name" 2 ;;
        *) measure "$name" 1 ;;
        esac
    done
done

python3 - "$work" "$RUNS" "$CONNECTIONS" "$CHUNKS" "$DURATION" "$OUT" <<'EOF'
import json, statistics, sys
work, runs, connections, chunks, duration, out = sys.argv[1:7]
runs = int(runs)
rows = []
for name, replicas in (("sqlite", 1), ("pg-1", 1), ("pg-2", 2)):
    lines = [json.loads(l) for l in open(f"{work}/{name}.runs") if l.strip()]
    per_run = [lines[i:i + replicas] for i in range(0, len(lines), replicas)]
    tps, cpu, errors, p99 = [], [], 0, []
    for group in per_run:
        turns = sum(r["turns"] for r in group)
        secs = max(r["run_secs"] for r in group)
        cpu_us = sum(r["server"]["cpu_run_us"] for r in group if r.get("server"))
        tps.append(turns / secs if secs else 0)
        cpu.append(cpu_us / turns if turns else float("nan"))
        errors += sum(r["error_total"] + r["lost_or_reordered"] for r in group)
        p99 += [r["turn_latency"]["p99_us"] / 1000 for r in group if r.get("turn_latency")]
    rows.append((name, replicas, statistics.median(tps), statistics.median(cpu),
                 statistics.median(p99) if p99 else float("nan"), errors))
base = rows[0]
lines = [
    f"Stream turns ({chunks} chunks of 20 characters), {connections} connections in all, "
    f"{duration} per run, medians of {runs} runs; CPU per turn is the replicas' "
    "CPU time over their turns (PostgreSQL and Redis not counted).",
    "",
    "| setup | replicas | turns/s | server CPU per turn (µs) | turn p99 (ms) | errors | CPU per turn / sqlite |",
    "|---|---|---|---|---|---|---|",
]
for name, replicas, tps, cpu, p99, errors in rows:
    lines.append(f"| {name} | {replicas} | {tps:.0f} | {cpu:.0f} | {p99:.1f} | {errors} | {cpu / base[3]:.2f} |")
text = "\n".join(lines) + "\n"
print(text)
if out:
    open(out, "w").write(text)
EOF
