#!/usr/bin/env bash
# The TypeScript client's checks, self-contained: npm ci, the generated
# types against api/websocket/*.asyncapi.yaml, the build (and that the web
# console's committed copy of the bundle is the fresh one), then the tests
# (node --test) against the agentwire binary named by AGENTWIRE_BIN
# (default: target/debug/agentwire from the repository's root). The S3
# upload test runs when AGENTWIRE_TEST_S3_ENDPOINT names an S3-compatible
# server (`eval "$(scripts/moto.sh start)"` starts one), else it is skipped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export AGENTWIRE_BIN="${AGENTWIRE_BIN:-$root/target/debug/agentwire}"
if [ ! -x "$AGENTWIRE_BIN" ]; then
    echo "test.sh: no agentwire binary at $AGENTWIRE_BIN (cargo build -p agentwire, or set AGENTWIRE_BIN)" >&2
    exit 1
fi
# Absolute, as the tests run from this directory.
AGENTWIRE_BIN="$(cd "$(dirname "$AGENTWIRE_BIN")" && pwd)/$(basename "$AGENTWIRE_BIN")"
cd "$here"
npm ci --no-audit --no-fund
node scripts/generate-types.mjs --check
node scripts/build.mjs --check
node --test --test-concurrency=1 --test-timeout=60000 test/
