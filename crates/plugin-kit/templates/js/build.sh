#!/usr/bin/env bash
# Builds {{name}} into {{file}}.wasm: installs the pinned componentize-js from npm, then
# runs it against wit/ with every WASI feature left out (needs Node.js and npm).
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-audit --no-fund
npx --no-install componentize-js src/plugin.js --wit wit -n {{world}} \
  -d http fetch-event stdio random clocks -o {{file}}.wasm
echo "built {{file}}.wasm"
