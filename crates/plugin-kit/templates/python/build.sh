#!/usr/bin/env bash
# Builds {{name}} into {{file}}.wasm: installs the pinned componentize-py into .venv (again
# when requirements.txt changes), then runs it against wit/ (needs python3 with venv).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -x .venv/bin/componentize-py ] || ! cmp -s requirements.txt .venv/requirements.txt; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
    cp requirements.txt .venv/requirements.txt
fi
.venv/bin/componentize-py -d wit -w {{world}} componentize -p src {{file}} -o {{file}}.wasm
echo "built {{file}}.wasm"
