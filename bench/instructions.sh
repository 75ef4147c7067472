#!/usr/bin/env bash
# Instructions per streamed 20-chunk turn, counted by callgrind (issue 36):
# agentwire runs under valgrind's instruction counter and
# `agentwire-loadgen instructions` drives it over its real socket, one
# connection at a time, in windows of N and 2N turns whose difference is N
# turns without the connection's cost (crates/agentwire-loadgen/src/instructions.rs).
# Unlike CPU time, the count does not move with the machine's load, so a
# committed budget (bench/instruction-budget.toml) can hold it.
#
#   bench/instructions.sh                  # the debug build (scripts/test's), both setups: report
#   bench/instructions.sh --check          # and check against the budget (.ci/run)
#   PROFILE=release bench/instructions.sh  # the release build's figures (the book's)
#   SETUPS=sqlite TURNS=100 ROUNDS=5 KEEP=/tmp/cg bench/instructions.sh
#
# Setups: `sqlite` (the embedded default) and `replica` (one replica on
# PostgreSQL and Redis: AGENTWIRE_TEST_POSTGRES and AGENTWIRE_TEST_REDIS when
# set, else throwaway ones from scripts/postgres.sh and scripts/redis.sh).
# KEEP=DIR keeps callgrind's dumps (DIR/SETUP/callgrind.out.N, one per
# window) for callgrind_annotate. valgrind is installed with apt-get when
# missing.
#
# --check fails (exit 1) when a setup's count is more than 3% over its budget
# `PROFILE.SETUP`; then it also checks the check: a budget lowered below the
# count must fail it.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
SETUPS=${SETUPS:-sqlite replica}
TURNS=${TURNS:-20}
ROUNDS=${ROUNDS:-5}
WARMUP=${WARMUP:-10}
BUDGET=bench/instruction-budget.toml
check=no
case "${1:-}" in
  --check) check=yes ;;
  "") ;;
  *) echo "usage: bench/instructions.sh [--check]" >&2; exit 64 ;;
esac

case "$PROFILE" in
  # The debug binaries as `cargo test --workspace` builds them (with the
  # features the tests turn on), so CI counts what scripts/test already
  # built; `cargo build` builds other variants, which count differently.
  debug) cargo test --workspace --no-run -q; bin=target/debug ;;
  release) cargo build --release -p agentwire -p agentwire-loadgen; bin=target/release ;;
  *) echo "PROFILE must be debug or release" >&2; exit 64 ;;
esac

if ! command -v valgrind >/dev/null; then
  echo "instructions.sh: installing valgrind with apt-get" >&2
  apt-get install -y -qq valgrind >&2
fi

stop=()
trap 'for c in "${stop[@]}"; do eval "$c"; done' EXIT
if [[ " $SETUPS " == *" replica "* ]]; then
  if [ -z "${AGENTWIRE_TEST_POSTGRES:-}" ]; then
    postgres_env="$(scripts/postgres.sh start)"
    eval "$postgres_env"
    stop+=('scripts/postgres.sh stop "$POSTGRES_DIR"')
  fi
  if [ -z "${AGENTWIRE_TEST_REDIS:-}" ]; then
    redis_env="$(scripts/redis.sh start)"
    eval "$redis_env"
    stop+=('scripts/redis.sh stop "$REDIS_DIR"')
  fi
fi

status=0
for setup in $SETUPS; do
  args=(instructions --setup "$setup" --turns "$TURNS" --rounds "$ROUNDS" --warmup "$WARMUP"
    --chunks 20 --agentwire-bin "$bin/agentwire")
  [ -n "${KEEP:-}" ] && args+=(--keep "$KEEP/$setup")
  echo "== $PROFILE $setup: agentwire-loadgen ${args[*]}" >&2
  out=$("$bin/agentwire-loadgen" "${args[@]}")
  echo "$PROFILE $(echo "$out" | head -n1)"
  measured=$(echo "$out" | tail -n1 | sed -n 's/.*"median":\([0-9]*\).*/\1/p')
  [ "$check" = yes ] || continue
  if ! "$bin/agentwire-loadgen" budget-check --budget "$BUDGET" --key "$PROFILE.$setup" --measured "$measured"; then
    status=1
  fi
  # The check's own failure mode: a budget 4% below the count must fail.
  lowered=$(mktemp)
  printf '[%s]\n%s = %s\n' "$PROFILE" "$setup" $((measured * 96 / 100)) >"$lowered"
  if "$bin/agentwire-loadgen" budget-check --budget "$lowered" --key "$PROFILE.$setup" \
    --measured "$measured" 2>/dev/null; then
    echo "instructions.sh: the check passed a budget 4% below the count" >&2
    status=1
  fi
  rm -f "$lowered"
done
exit $status
