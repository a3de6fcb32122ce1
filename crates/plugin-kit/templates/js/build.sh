#!/usr/bin/env bash
# Builds {{name}} into {{file}}.wasm: installs componentize-js exactly as package-lock.json
# pins it (npm ci; again only when the lock file changes), then runs it against wit/ with
# every WASI feature left out (needs Node.js and npm).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -d node_modules ] || ! cmp -s package-lock.json node_modules/.installed-from-lock; then
    npm ci --no-audit --no-fund
    cp package-lock.json node_modules/.installed-from-lock
fi
npx --no-install componentize-js src/plugin.js --wit wit -n {{world}} \
  -d http fetch-event stdio random clocks -o {{file}}.wasm
echo "built {{file}}.wasm"
