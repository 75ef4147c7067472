#!/usr/bin/env bash
# Autobahn|Testsuite's fuzzing client (`wstest -m fuzzingclient`) against
# agentwire, on both dialects: Omnia (/ws?agent=echo) and Gnosari
# (/ws/agent/echo). Fails unless every case is OK, NON-STRICT or
# INFORMATIONAL (and its close OK or INFORMATIONAL).
#
#   scripts/autobahn.sh              # sections 12 and 13: permessage-deflate (216 cases per dialect)
#   scripts/autobahn.sh all          # sections 1 to 13
#   scripts/autobahn.sh '1.*,7.*'    # any of wstest's case patterns, comma-separated
#
# The suite expects an echo server, and neither dialect is one (each greets
# first and answers a frame that is not its protocol with an error frame),
# so the server runs with `server.websocket.echo_frames: true`: the same
# upgrade checks, socket, driver, limits and compression, with each message
# echoed in place of the dialect.
#
# wstest is Python 2 code (autobahntestsuite 25.10.1 pins autobahn 0.10.9 and
# Twisted 19.10): it is installed into a virtualenv at target/autobahn/venv
# on first use, from PyPI, with Python 2.7 from AUTOBAHN_PYTHON or pyenv
# (~/.pyenv/versions/2.7.*; `pyenv install 2.7.18` where pyenv can fetch
# it: Debian has shipped no Python 2 since bookworm). The server is the
# debug build unless AUTOBAHN_PROFILE=release. The reports (HTML and
# index.json) are in target/autobahn/report/{omnia,gnosari}/; one wstest
# runs per dialect, at the same time. Targets 127.0.0.1 only.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

cases=${1:-12.*,13.*}
[ "$cases" = all ] && cases=$(seq -s, -f '%g.*' 1 13)
work="$root/target/autobahn"
venv="$work/venv"
profile=${AUTOBAHN_PROFILE:-debug}
mkdir -p "$work"

find_python2() {
    if [ -n "${AUTOBAHN_PYTHON:-}" ]; then
        echo "$AUTOBAHN_PYTHON"
        return
    fi
    local candidate
    for candidate in "$HOME"/.pyenv/versions/2.7.*/bin/python "$(command -v python2.7 || true)"; do
        if [ -x "$candidate" ]; then
            echo "$candidate"
            return
        fi
    done
    echo "autobahn.sh: no Python 2.7 (set AUTOBAHN_PYTHON, or pyenv install 2.7.18)" >&2
    return 1
}

if [ ! -x "$venv/bin/wstest" ]; then
    python2=$(find_python2)
    echo "autobahn.sh: installing wstest into $venv with $python2" >&2
    # virtualenv 20.22 dropped Python 2: an older one, beside the venv.
    "$python2" -m pip install -q --disable-pip-version-check --target "$work/virtualenv" \
        'virtualenv<20.22' 2>&1 | grep -v DEPRECATION >&2 || true
    PYTHONPATH="$work/virtualenv" "$python2" -m virtualenv -q "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check autobahntestsuite==25.10.1 2>&1 |
        grep -v DEPRECATION >&2 || true
    [ -x "$venv/bin/wstest" ] || { echo "autobahn.sh: wstest did not install" >&2; exit 1; }
fi

if [ "$profile" = release ]; then
    cargo build -q --release -p agentwire
else
    cargo build -q -p agentwire
fi
binary="${CARGO_TARGET_DIR:-$root/target}/$profile/agentwire"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/config.yaml" <<EOF
server:
  listen: 127.0.0.1:$port
  websocket:
    echo_frames: true
storage:
  sessions: memory
  media:
    backend: none
agents:
  - name: echo
    handler: echo
EOF
# One wstest per dialect, side by side: the suite's client is the slower
# end (Python), and each sends one message at a time.
spec() {
    cat <<EOF
{
  "outdir": "$work/report/$1",
  "servers": [{"agent": "$1", "url": "ws://127.0.0.1:$port$2"}],
  "cases": $(python3 -c 'import json, sys; print(json.dumps(sys.argv[1].split(",")))' "$cases"),
  "exclude-cases": [],
  "exclude-agent-cases": {}
}
EOF
}
spec omnia "/ws?agent=echo" >"$work/omnia.json"
spec gnosari "/ws/agent/echo" >"$work/gnosari.json"

rm -rf "$work/report"
RUST_LOG=warn "$binary" serve --config "$work/config.yaml" >"$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done

echo "autobahn.sh: cases $cases against 127.0.0.1:$port (omnia, gnosari)" >&2
start=$(date +%s)
clients=()
for dialect in omnia gnosari; do
    (cd "$work" && exec "$venv/bin/wstest" -m fuzzingclient -s "$dialect.json" >"$work/$dialect.log" 2>&1) &
    clients+=($!)
done
trap 'kill "${clients[@]}" "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
for client in "${clients[@]}"; do
    wait "$client" || { tail -20 "$work"/*.log >&2; exit 1; }
done
echo "autobahn.sh: wstest took $(($(date +%s) - start)) s; reports in $work/report/{omnia,gnosari}/index.html" >&2

python3 - "$work/report"/*/index.json <<'EOF'
import json, sys
from collections import Counter

passing = {"OK", "NON-STRICT", "INFORMATIONAL"}
closing = {"OK", "INFORMATIONAL"}
report = {}
for path in sys.argv[1:]:
    report.update(json.load(open(path)))
failed = 0
for agent, cases in sorted(report.items()):
    counts = Counter(result["behavior"] for result in cases.values())
    print(f"{agent}: {len(cases)} cases: " + ", ".join(f"{n} {b}" for b, n in sorted(counts.items())))
    for case, result in sorted(cases.items(), key=lambda kv: [int(p) for p in kv[0].split(".")]):
        if result["behavior"] not in passing or result["behaviorClose"] not in closing:
            failed += 1
            print(f"  {case}: {result['behavior']} (close {result['behaviorClose']}, "
                  f"code {result.get('remoteCloseCode')}) {result['reportfile']}")
if not report:
    print("no results")
    sys.exit(1)
sys.exit(1 if failed else 0)
EOF
