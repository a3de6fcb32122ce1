#!/usr/bin/env bash
# Builds the secret-guard validator (Python) into a WebAssembly component of mcpproxy's
# validator-plugin world: installs the pinned componentize-py from PyPI into a venv, then
# runs it against the repository's wit/.
#   bash plugins/examples/py-secret-guard/build.sh [OUT.wasm]
# Default output: target/py-example/secret_guard.wasm (in the repository root).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$root/target/py-example/secret_guard.wasm}"
mkdir -p "$(dirname "$out")"
cd "$here"
if [ ! -x .venv/bin/componentize-py ] || ! cmp -s requirements.txt .venv/requirements.txt; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
    cp requirements.txt .venv/requirements.txt
fi
# No --stub-wasi: the component imports WASI (environment, clocks, random, filesystem, stdio),
# and the proxy links it with nothing granted.
.venv/bin/componentize-py -d "$root/wit" -w validator-plugin \
    componentize -p src secret_guard -o "$out"
echo "built $out"
