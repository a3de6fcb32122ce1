#!/usr/bin/env bash
# Builds the data-guard validator (JavaScript) into a WebAssembly component of mcpproxy's
# validator-plugin world: installs the pinned toolchain from npm, then runs componentize-js.
#   bash plugins/examples/js-data-guard/build.sh [OUT.wasm]
# Default output: target/js-example/data_guard.wasm (in the repository root).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$root/target/js-example/data_guard.wasm}"
mkdir -p "$(dirname "$out")"
cd "$here"
npm ci --no-audit --no-fund
# -d: no WASI at all (no stdio, clocks, randomness, http); the component imports only
# mcpproxy:plugin/host.
npx --no-install componentize-js src/data-guard.js \
  --wit "$root/wit" -n validator-plugin \
  -d http fetch-event stdio random clocks \
  -o "$out"
echo "built $out"
