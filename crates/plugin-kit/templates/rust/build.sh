#!/usr/bin/env bash
# Builds {{name}} into {{file}}.wasm (needs Rust and `rustup target add wasm32-wasip2`).
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{file}}.wasm" {{file}}.wasm
echo "built {{file}}.wasm"
