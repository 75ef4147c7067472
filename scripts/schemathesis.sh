#!/usr/bin/env bash
# Property-based tests of the HTTP APIs against their own OpenAPI document
# (`GET /openapi.json`): Schemathesis (PyPI, installed into
# target/schemathesis-venv on first use) generates valid and invalid
# requests for every documented operation and checks that the server's
# answers are what the document says (status codes, content types, bodies,
# no 5xx but the documented ones). Builds the server, starts it on a
# throwaway config (two function agents, a SQLite file, one
# API key every request carries, so the owner's routes have data to find),
# runs, stops it.
# Extra arguments go to `schemathesis run` (such as `--max-examples 200`).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/schemathesis-venv
if [[ ! -x "$venv/bin/schemathesis" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet schemathesis
fi
cargo build --quiet -p agentwire

dir="$(mktemp -d)"
key="ak_schemathesis_$RANDOM$RANDOM"
key_sha256="$(printf %s "$key" | sha256sum | cut -d' ' -f1)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$dir/agentwire.yaml" <<EOF
server:
  listen: 127.0.0.1:$port
storage:
  sessions: sqlite://$dir/agentwire.db
auth:
  api_keys:
    - {id: fuzz, sha256: "$key_sha256", subject: schemathesis}
providers:
  - name: scripted
    type: mock
    model: mock-1
    default_response: '{"answer": 42}'
agents:
  - name: echo
    handler: echo
    function: {enabled: true}
  - name: answers
    handler: runtime
    provider: scripted
    function:
      enabled: true
      input_schema:
        type: object
        properties: {question: {type: string}}
        required: [question]
      output_schema:
        type: object
        properties: {answer: {type: integer}}
        required: [answer]
EOF

# Where the document cannot say what the server accepts: a page cursor is
# valid only as a page's `next_cursor` (opaque, so any other string is
# refused 400 while its schema is just a string), and Schemathesis writes
# no `application/x-ndjson` body for the memories import.
cat >"$dir/schemathesis.toml" <<EOF
[[operations]]
include-operation-id = "listSessions"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401"]

[[operations]]
include-operation-id = "importMemories"
enabled = false
EOF

target/debug/agentwire serve --config "$dir/agentwire.yaml" 2>"$dir/server.log" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$dir"' EXIT

# From the throwaway directory, where Schemathesis keeps its cache.
cd "$dir"
"$OLDPWD/$venv/bin/schemathesis" --config-file schemathesis.toml run \
    "http://127.0.0.1:$port/openapi.json" --url "http://127.0.0.1:$port" \
    --header "Authorization: Bearer $key" --wait-for-schema 30 --checks all "$@"
