#!/usr/bin/env bash
# The partition harness (docs/src/partitions.md): three replicas, PostgreSQL
# and Redis, each in a network namespace of its own, clients of both
# dialects and a nemesis (cuts, loss, latency, pause, kill), then a checker
# over every frame the clients saw and what PostgreSQL holds.
#
#   scripts/partition.sh [--duration 2m|30m|SECONDS] [--seed N] [--faults a,b,...]
#   scripts/partition.sh --self-test      the checker's tests only (no root)
#
# Needs root (ip netns, nftables). Installs Debian's iproute2, nftables,
# postgresql and redis-server with apt-get when missing, and `websockets`
# from PyPI into target/partition-venv. Runs the release binary when
# target/release/agentwire exists, else the debug one (built when missing);
# AGENTWIRE_BIN overrides. Writes the history, the nemesis schedule, the
# servers' logs and the checker's verdict to a directory it prints; exits 1
# when the checker rejects the history. The namespaces, links and
# processes of the run (names aw<run id>-…) are removed on exit, whatever
# happens.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
here="$root/scripts/partition"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/partition-venv"
websockets_pin="websockets==17.4"

duration=120
seed=""
faults=""
self_test=""
while [ $# -gt 0 ]; do
    case "$1" in
        --duration) duration="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --faults) faults="$2"; shift 2 ;;
        --self-test) self_test=yes; shift ;;
        *) echo "usage: $0 [--duration 2m|30m|SECONDS] [--seed N] [--faults a,b,...] | --self-test" >&2; exit 64 ;;
    esac
done
case "$duration" in
    *m) duration=$(( ${duration%m} * 60 )) ;;
    *s) duration="${duration%s}" ;;
esac

if [ -n "$self_test" ]; then
    cd "$here" && exec python3 -m unittest -v test_checker
fi

if [ "$(id -u)" != 0 ]; then
    echo "partition.sh: needs root (network namespaces and nftables)" >&2
    exit 1
fi

# Installs Debian package $2 when command $1 is missing.
need() {
    command -v "$1" >/dev/null && return 0
    echo "partition.sh: installing $2 with apt-get" >&2
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2" ||
        { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$2"; }; } >&2
}
need ip iproute2
need nft nftables
need redis-server redis-server
"$root/scripts/postgres.sh" install

if [ "$(cat "$venv/pins" 2>/dev/null)" != "$websockets_pin" ]; then
    echo "partition.sh: installing $websockets_pin into $venv" >&2
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$websockets_pin" >&2
    echo "$websockets_pin" >"$venv/pins"
fi

binary="${AGENTWIRE_BIN:-}"
if [ -z "$binary" ]; then
    if [ -x "$target/release/agentwire" ]; then
        binary="$target/release/agentwire"
    else
        [ -x "$target/debug/agentwire" ] || (cd "$root" && cargo build -p agentwire --bin agentwire >&2)
        binary="$target/debug/agentwire"
    fi
fi

# Four hex digits name this run's namespaces and links (aw<id>-r1, aw<id>br).
run_id="$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')"
out="$(mktemp -d /tmp/agentwire-partition.XXXXXX)"
cleanup() {
    for ns in $(ip netns list | awk '{print $1}' | grep "^aw$run_id-" || true); do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "aw${run_id}br" 2>/dev/null || true
    # PostgreSQL's data directory, named by the harness (killed above).
    if [ -f "$out/postgres.dir" ]; then
        case "$(cat "$out/postgres.dir")" in
            /tmp/agentwire-pg.partition.*) rm -rf "$(cat "$out/postgres.dir")" ;;
        esac
    fi
}
trap cleanup EXIT INT TERM

echo "partition.sh: run $run_id with $binary; history, schedule and verdict in $out" >&2
status=0
(cd "$here" && "$venv/bin/python" harness.py --run-id "$run_id" --out "$out" --binary "$binary" \
    --duration "$duration" ${seed:+--seed "$seed"} ${faults:+--faults "$faults"}) || status=$?
if [ "$status" != 0 ]; then
    echo "partition.sh: the checker rejected the history (or the harness failed: exit $status); see $out" >&2
fi
echo "$out"
exit "$status"
