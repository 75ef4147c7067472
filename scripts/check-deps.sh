#!/usr/bin/env bash
# The dependency invariants of ARCHITECTURE.md, enforced: this script is
# their single source of truth (ARCHITECTURE.md repeats them in prose).
# Each rule is checked on what cargo resolves for the crate alone, as
# `cargo build -p <crate> --all-features` would see it, over normal
# dependencies only: a test may use a real adapter or an axum fake server.
# Prints every broken rule and exits 1 if there is one. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# ---------------------------------------------------------------- rules

# The core is the domain types and the ports: no network, database, object
# storage, TLS or WebSocket crate anywhere under it.
CORE_FORBIDDEN=(axum hyper hyper-util h2 reqwest rusqlite libsqlite3-sys object_store
    tungstenite tokio-tungstenite rustls ring mio socket2 rmcp process-wrap
    tokio-postgres postgres-protocol deadpool-postgres redis)
# The engine drives the core's ports and does no IO either: the same
# forbidden crates and tokio features as the core, and the core alone among
# our crates.
ENGINE=agentwire-engine

# tokio in the core: spawn (rt), sync, time and select! (macros); no net,
# fs, process, signal, io-util, io-std or runtime flavour. `default` is
# empty in tokio; `tokio-macros` is the crate behind `macros`.
CORE_TOKIO_FEATURES=(default rt sync time macros tokio-macros)

# The wire dialects and protocols are pure: JSON in, JSON out, on the
# core's types.
PURE_CRATES=(agentwire-omnia agentwire-gnosari agentwire-a2a agentwire-mcp)
PURE_ALLOWED=(agentwire-core serde serde_json thiserror)

# PromptPacks (agentwire-pack) are parsed and checked without IO: the text
# comes from its caller (the binary reads the file). serde-saphyr is the
# YAML authoring form and the positions of keys.
PACK=agentwire-pack
PACK_ALLOWED=(serde serde_json serde-saphyr thiserror)
PACK_FORBIDDEN=(tokio "${CORE_FORBIDDEN[@]}")

# Adapters, handlers and the runtime see the rest of the system through
# the core's ports only: not the engine that drives them.
ADAPTERS=(agentwire-store agentwire-media agentwire-providers agentwire-tools
    agentwire-auth agentwire-handlers agentwire-runtime agentwire-live)

# The server speaks the dialects over axum; it receives backends built.
SERVER=agentwire-server
SERVER_WORKSPACE_ALLOWED=(agentwire-core agentwire-engine agentwire-omnia agentwire-gnosari agentwire-a2a agentwire-mcp)
SERVER_FORBIDDEN=(reqwest rusqlite object_store rmcp tokio-postgres deadpool-postgres redis)

# Only these know axum (the binary through the server; the load
# generator's bare baseline).
AXUM_ALLOWED=(agentwire-server agentwire agentwire-loadgen)

# The PostgreSQL driver and its pool: the session store's adapter alone
# (agentwire-store, cargo feature `postgres`), which the binary gets through
# that feature, never as a dependency of its own.
POSTGRES_CRATES=(tokio-postgres deadpool-postgres postgres-protocol postgres-types)
POSTGRES_ALLOWED=(agentwire-store agentwire)
POSTGRES_OWNER=agentwire-store

# The Redis client: the live-state adapter alone (agentwire-live), which the
# binary gets through its `redis` feature.
REDIS_OWNER=agentwire-live
REDIS_ALLOWED=(agentwire-live agentwire)

# The terminal client is a client of the wire alone, so it works against
# any server that speaks the Omnia dialect: none of our crates.
CLIENT=agentwire-chat

# The binary is the one place that knows every adapter, and the one crate
# that picks (and installs, in `main`) rustls' crypto provider.
BINARY=agentwire
# Crates that name rustls for its types (the PostgreSQL store's certificate
# verifiers), with no crypto provider in their tree: they use the one `main`
# installed and cannot install another.
RUSTLS_TYPES=(agentwire-store)
PROVIDERS=(ring aws-lc-rs)

# Nowhere: aws-lc wants cmake and NASM to build; OpenSSL wants the system's.
NOWHERE=(aws-lc-rs aws-lc-sys openssl-sys native-tls)

# One admission path (crates/agentwire-server/src/connection/admission.rs):
# the dialects' files call no limiter, budget, turn rate, media check or
# the engine's submit themselves. Each pattern is a way to skip admission.
DIALECT_DIRS=(crates/agentwire-server/src/omnia crates/agentwire-server/src/gnosari
    crates/agentwire-server/src/a2a crates/agentwire-server/src/functions
    crates/agentwire-server/src/mcp)
ADMISSION_ONLY=('TokenBucket' 'budget::take' 'inbound\.try_take' 'take_turn\(' 'engine\.submit\('
    '\.submit\(' 'SubmitRequest' 'expired_now\(' 'check_storage_refs' 'media\.store\.info')

# The core's types know no wire format: no serde derive, impl or attribute
# in its sources (comments aside), and serde is not one of its dependencies
# (serde_json is: `Value` is data, tool arguments). Each crate that writes
# JSON writes it from mirror structs of its own (agentwire-live's codec.rs,
# agentwire-store's codec.rs, the dialects).
CORE_SRC=crates/agentwire-core/src
CORE_NO_SERDE='\bserde::|\bserde_derive\b|#\[serde\(|\b(Serialize|Deserialize|Serializer|Deserializer)\b'

# ---------------------------------------------------------------- checks

failures=0
fail() {
    echo "check-deps: $*" >&2
    failures=$((failures + 1))
}

# Every package in <crate>'s normal dependency tree, one name a line.
tree_of() {
    cargo tree -q -p "$1" --all-features -e normal --prefix none -f '{p}' |
        awk '{print $1}' | sort -u
}

# <crate>'s direct normal dependencies, one name a line.
direct_of() {
    cargo tree -q -p "$1" --all-features -e normal --prefix none -f '{p}' --depth 1 |
        tail -n +2 | awk '{print $1}' | sort -u
}

# tokio's features enabled when <crate> is built alone.
tokio_features_of() {
    cargo tree -q -p "$1" --all-features -e normal,features -i tokio --prefix none |
        sed -n 's/^tokio feature "\([^"]*\)".*/\1/p' | sort -u
}

in_list() {
    local needle=$1
    shift
    local item
    for item in "$@"; do
        [[ $item == "$needle" ]] && return 0
    done
    return 1
}

mapfile -t members < <(
    cargo metadata -q --format-version 1 --no-deps |
        python3 -c 'import json, sys; [print(p["name"]) for p in json.load(sys.stdin)["packages"]]' |
        sort
)
[[ ${#members[@]} -gt 0 ]] || {
    echo "check-deps: no workspace members found" >&2
    exit 1
}

declare -A tree direct
for member in "${members[@]}"; do
    tree[$member]=$(tree_of "$member")
    direct[$member]=$(direct_of "$member")
done

# agentwire-core and the engine: no IO crate below them, and tokio without
# IO features; the core depends on none of our crates, the engine on the
# core alone.
for crate in agentwire-core "$ENGINE"; do
    for dep in ${tree[$crate]}; do
        if in_list "$dep" "${CORE_FORBIDDEN[@]}"; then
            fail "$crate depends on $dep (it does no IO: no network, database, storage, TLS or WebSocket crate)"
        fi
    done
    for feature in $(tokio_features_of "$crate"); do
        if ! in_list "$feature" "${CORE_TOKIO_FEATURES[@]}"; then
            fail "$crate gets tokio's \"$feature\" feature (it uses tokio for spawn, sync, time and select! only: ${CORE_TOKIO_FEATURES[*]})"
        fi
    done
done
for dep in ${tree[agentwire-core]}; do
    if [[ $dep == agentwire-* && $dep != agentwire-core ]]; then
        fail "agentwire-core depends on $dep (the core depends on none of our crates)"
    fi
done
for dep in ${direct[$ENGINE]}; do
    if [[ $dep == agentwire* && $dep != agentwire-core ]]; then
        fail "$ENGINE depends on $dep (the engine depends on agentwire-core alone among our crates)"
    fi
done

# The dialects: serde, serde_json, thiserror and the core, nothing else.
for crate in "${PURE_CRATES[@]}"; do
    for dep in ${direct[$crate]}; do
        if ! in_list "$dep" "${PURE_ALLOWED[@]}"; then
            fail "$crate depends on $dep (a dialect crate is pure: ${PURE_ALLOWED[*]} only)"
        fi
    done
done

# The pack crate: pure, and no IO crate anywhere under it.
for dep in ${direct[$PACK]}; do
    if ! in_list "$dep" "${PACK_ALLOWED[@]}"; then
        fail "$PACK depends on $dep (the pack crate is pure: ${PACK_ALLOWED[*]} only)"
    fi
done
for dep in ${tree[$PACK]}; do
    if in_list "$dep" "${PACK_FORBIDDEN[@]}"; then
        fail "$PACK depends on $dep (the pack crate does no IO: its caller reads the file)"
    fi
done

# Adapters, handlers, runtime: the core only, among our crates.
for crate in "${ADAPTERS[@]}"; do
    for dep in ${direct[$crate]}; do
        if [[ $dep == agentwire* && $dep != agentwire-core ]]; then
            fail "$crate depends on $dep (an adapter depends on agentwire-core only among our crates: the ports, not the engine)"
        fi
    done
done

# The server: the core and the dialects, no backend.
for dep in ${direct[$SERVER]}; do
    if [[ $dep == agentwire* ]] && ! in_list "$dep" "${SERVER_WORKSPACE_ALLOWED[@]}"; then
        fail "$SERVER depends on $dep (the server receives backends built: ${SERVER_WORKSPACE_ALLOWED[*]} only among our crates)"
    fi
done
for dep in ${tree[$SERVER]}; do
    if in_list "$dep" "${SERVER_FORBIDDEN[@]}"; then
        fail "$SERVER depends on $dep (the server never constructs a backend)"
    fi
done

for dep in ${direct[$CLIENT]}; do
    if [[ $dep == agentwire* ]]; then
        fail "$CLIENT depends on $dep (the chat client knows the wire, not our crates)"
    fi
done

for member in "${members[@]}"; do
    # axum: the server, and what is built on it or beside it.
    if ! in_list "$member" "${AXUM_ALLOWED[@]}" && in_list axum ${tree[$member]}; then
        fail "$member depends on axum (only ${AXUM_ALLOWED[*]} do)"
    fi
    if [[ $member != "$BINARY" ]]; then
        # Our crates' own edges: adapters and the server are wired by the
        # binary alone, and nothing is built on the binary.
        for dep in ${direct[$member]}; do
            if [[ $dep == "$SERVER" || $dep == "$BINARY" ]] || in_list "$dep" "${ADAPTERS[@]}"; then
                fail "$member depends on $dep (only $BINARY wires adapters and the server)"
            fi
        done
        # rustls directly: a library that names it could install a crypto
        # provider; that choice is the binary's, made once in `main`.
        if in_list rustls ${direct[$member]} && ! in_list "$member" "${RUSTLS_TYPES[@]}"; then
            fail "$member depends on rustls directly (only $BINARY does: it installs the crypto provider in main)"
        fi
        if in_list "$member" "${RUSTLS_TYPES[@]}"; then
            for provider in "${PROVIDERS[@]}"; do
                if in_list "$provider" ${tree[$member]}; then
                    fail "$member has $provider in its tree (it names rustls for its types only; the provider is $BINARY's)"
                fi
            done
        fi
    fi
    # PostgreSQL: the store's adapter only; the binary through its feature.
    for dep in ${tree[$member]}; do
        if in_list "$dep" "${POSTGRES_CRATES[@]}" && ! in_list "$member" "${POSTGRES_ALLOWED[@]}"; then
            fail "$member depends on $dep (only $POSTGRES_OWNER talks to PostgreSQL; ${POSTGRES_ALLOWED[*]} may have it)"
        fi
    done
    if [[ $member != "$POSTGRES_OWNER" ]]; then
        for dep in ${direct[$member]}; do
            if in_list "$dep" "${POSTGRES_CRATES[@]}"; then
                fail "$member depends on $dep directly (PostgreSQL comes through $POSTGRES_OWNER's \`postgres\` feature)"
            fi
        done
    fi
    # Redis: the live-state adapter only; the binary through it.
    if in_list redis ${tree[$member]} && ! in_list "$member" "${REDIS_ALLOWED[@]}"; then
        fail "$member depends on redis (only $REDIS_OWNER talks to Redis; ${REDIS_ALLOWED[*]} may have it)"
    fi
    if [[ $member != "$REDIS_OWNER" ]] && in_list redis ${direct[$member]}; then
        fail "$member depends on redis directly (Redis comes through $REDIS_OWNER)"
    fi
    for dep in ${tree[$member]}; do
        if in_list "$dep" "${NOWHERE[@]}"; then
            fail "$member depends on $dep (aws-lc and OpenSSL stay out of the build: TLS is rustls on ring)"
        fi
    done
done

# The core: no serde.
while IFS= read -r hit; do
    fail "$hit: serde in the core (core types are not Serialize; the crate that writes the JSON keeps mirror structs)"
done < <(grep -rnE "$CORE_NO_SERDE" "$CORE_SRC" --include='*.rs' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if in_list serde ${direct[agentwire-core]}; then
    fail "agentwire-core depends on serde (core types are not Serialize; serde_json alone, for Value)"
fi

for pattern in "${ADMISSION_ONLY[@]}"; do
    while IFS= read -r hit; do
        fail "$hit: a dialect skips admission ($pattern belongs to connection/admission.rs)"
    done < <(grep -rnE "$pattern" "${DIALECT_DIRS[@]}" --include='*.rs' || true)
done

# Functions are read whole (clippy::too_many_lines, denied in Cargo.toml):
# no `allow` of it anywhere.
while IFS= read -r hit; do
    fail "$hit: too_many_lines is not allowed away (split the function where a step ends)"
done < <(grep -rnE 'allow\([^)]*too_many_lines' crates fuzz --include='*.rs' || true)

if ((failures > 0)); then
    echo "check-deps: $failures rule(s) broken (the rules: scripts/check-deps.sh, ARCHITECTURE.md)" >&2
    exit 1
fi
echo "check-deps: ${#members[@]} crates, every dependency rule holds"
