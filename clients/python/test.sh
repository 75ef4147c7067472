#!/usr/bin/env bash
# Tests the Python client against the real server binary, then builds the
# package and installs it (sdist and wheel) into a clean virtualenv.
#
#   AGENTWIRE_BIN=/path/to/agentwire ./test.sh      (default: target/debug/agentwire
#                                                    under the repository root)
#   PYTHON=python3.11 ./test.sh                     (the interpreter for the venvs)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${AGENTWIRE_BIN:-target/debug/agentwire}"
case "$bin" in /*) ;; *) bin="$repo/$bin" ;; esac
export AGENTWIRE_BIN="$bin"
if [ ! -x "$AGENTWIRE_BIN" ]; then
  echo "test.sh: no agentwire binary at $AGENTWIRE_BIN (build it, or set AGENTWIRE_BIN)" >&2
  exit 1
fi
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"

venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[test]"

echo "== types: mypy --strict on the package"
(cd "$here" && "$venv/bin/python" -m mypy --strict src/agentwire_client)

echo "== tests against $AGENTWIRE_BIN"
(cd "$here" && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@")

echo "== package: build the sdist and the wheel, install each into a clean venv"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$venv/bin/python" -m build --outdir "$scratch/dist" "$here" >"$scratch/build.log" 2>&1 \
  || { cat "$scratch/build.log" >&2; exit 1; }
ls "$scratch/dist"
for artefact in "$scratch"/dist/agentwire_client-*.tar.gz "$scratch"/dist/agentwire_client-*.whl; do
  clean="$scratch/venv-$(basename "$artefact")"
  "$python" -m venv "$clean"
  "$clean/bin/python" -m pip install --quiet --disable-pip-version-check "$artefact"
  # Imported from an empty directory, so the source tree cannot stand in for it.
  (cd "$scratch" && "$clean/bin/python" - <<'PY'
import importlib.resources, agentwire_client
assert agentwire_client.connect and agentwire_client.connect_gnosari
assert importlib.resources.files("agentwire_client").joinpath("py.typed").is_file(), "py.typed"
assert "site-packages" in agentwire_client.__file__, agentwire_client.__file__
print("imported", agentwire_client.__version__, "from", agentwire_client.__file__)
PY
  )
done
echo "== all good"
