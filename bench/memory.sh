#!/usr/bin/env bash
# Agent memory's latency at scale (issue 33): fills a store with MEMORIES
# memories across CALLERS callers, then times 2,000 recalls and 2,000
# remembers one at a time (crates/agentwire-store/examples/memory_bench.rs),
# on SQLite and on a throwaway PostgreSQL cluster (scripts/postgres.sh),
# full text only and with a stored vector of 512 numbers per memory (every
# recall and remember then carries one too), and writes the figures to
# docs/src/memory-benchmark.md.
#
#   bench/memory.sh                         # 1,000,000 memories, 10,000 callers
#   MEMORIES=100000 CALLERS=1000 bench/memory.sh
#   STORES=sqlite DIMENSIONS=512 OUT=/tmp/m.md bench/memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."

MEMORIES=${MEMORIES:-1000000}
CALLERS=${CALLERS:-10000}
STORES=${STORES:-sqlite postgres}
DIMENSIONS=${DIMENSIONS:-0 512}
OUT=${OUT:-docs/src/memory-benchmark.md}

cargo build --release -q -p agentwire-store --features postgres --example memory_bench
BENCH=target/release/examples/memory_bench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

results=""
for store in $STORES; do
  for dims in $DIMENSIONS; do
    label="$store, full text only"
    [[ $dims != 0 ]] && label="$store, with $dims-number vectors"
    echo "memory bench: $label, $MEMORIES memories, $CALLERS callers" >&2
    out="$WORK/$store-$dims.txt"
    if [[ $store == postgres ]]; then
        pg_env="$(scripts/postgres.sh start)"
        eval "$pg_env"
        AGENTWIRE_BENCH_POSTGRES="$AGENTWIRE_TEST_POSTGRES" TMPDIR="$WORK" \
            "$BENCH" postgres "$MEMORIES" "$CALLERS" "$dims" >"$out"
        scripts/postgres.sh stop "$POSTGRES_DIR"
    else
        TMPDIR="$WORK" "$BENCH" sqlite "$MEMORIES" "$CALLERS" "$dims" >"$out"
        rm -rf "$WORK"/agentwire-memory-bench-*
    fi
    cat "$out" >&2
    results+="### $label"$'\n\n```text\n'"$(grep -v '^sqlite: ' "$out")"$'\n```\n\n'
  done
done

commit=$(git rev-parse --short HEAD)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
cat >"$OUT" <<DOC
# Agent memory at scale

Measured $(date -u +%Y-%m-%d) by \`bench/memory.sh\` at commit $commit, on
$(nproc) cores ($cpu), a release build: $MEMORIES memories across $CALLERS
callers (three agents each, no facet; 8 to 15 words of a 4,096-word
vocabulary each), filled 64 writes at a time; then 2,000 recalls (two
words, the caller's scope and the agent's, limit 10) and 2,000 remembers,
one at a time, from the same process as the store (no network hop but
PostgreSQL's local socket). "With vectors": every memory is stored with a
random vector of that many numbers and every recall and remember carries
one, so the exact vector search (recall) and the supersession check
(remember) run besides the full-text search; the embeddings endpoint's
own time is not included (it is the endpoint's).

Targets (issue 33): recall p95 at most 15 ms, remember p95 at most 5 ms.

${results}Reproduce: \`bench/memory.sh\` (\`MEMORIES=… CALLERS=… STORES=… DIMENSIONS=…\`).
DOC
echo "memory bench: wrote $OUT" >&2
