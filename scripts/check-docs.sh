#!/usr/bin/env bash
# The documentation's checks (run by .ci/run): builds the book (docs/, with
# mdBook) into target/book, then runs scripts/check_docs.py, which fails on
# a broken relative link or #anchor in the book, README.md or
# ARCHITECTURE.md, on a repository path ARCHITECTURE.md names that does not
# exist, and on README.md or ARCHITECTURE.md over 25 KiB.
#
# mdBook is installed into target/tools/ on first use (cargo install, a few
# minutes on two cores; without its default features: no `serve`, `watch`
# or search index, which a check does not need). MDBOOK overrides the binary.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
mdbook=${MDBOOK:-target/tools/bin/mdbook}

if [ -z "${MDBOOK:-}" ] && ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$MDBOOK_VERSION"; then
    echo "check-docs: installing mdbook $MDBOOK_VERSION into target/tools/" >&2
    cargo install mdbook --locked --version "$MDBOOK_VERSION" --no-default-features \
        --root target/tools
fi

# The book's own build: a chapter missing from docs/src, a bad SUMMARY.md,
# a broken {{#include}} fail here (docs/book.toml: build-dir target/book).
rm -rf target/book
"$mdbook" build docs

python3 scripts/check_docs.py --book target/book
