#!/usr/bin/env bash
# Installs what the integration tests need beyond the Rust toolchain, and is
# fast (no network) when it is already there:
#
#   - @modelcontextprotocol/server-everything, the reference MCP server, into
#     target/npm (for crates/agentwire-tools/tests/tools.rs).
#
# Prints the path of server-everything's JS entry point on stdout (run it as
# `node <path> stdio`); progress goes to stderr. The tests find it there, or
# wherever AGENTWIRE_TEST_MCP_EVERYTHING points. Needs node and npm, and the
# npm registry on first use.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/target/npm"
package="@modelcontextprotocol/server-everything"
version="2026.8.31"
pkg_dir="$prefix/node_modules/$package"
entry="$pkg_dir/dist/index.js"

installed_version() {
    [ -f "$pkg_dir/package.json" ] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_dir/package.json" 2>/dev/null || true
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "install-test-deps.sh: node and npm are needed (apt-get install nodejs npm)" >&2
    exit 1
fi

if [ "$(installed_version)" != "$version" ] || [ ! -f "$entry" ]; then
    echo "install-test-deps.sh: installing $package@$version into $prefix" >&2
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        "$package@$version" >&2
fi

if [ ! -f "$entry" ]; then
    echo "install-test-deps.sh: $entry missing after install" >&2
    exit 1
fi
echo "$entry"
