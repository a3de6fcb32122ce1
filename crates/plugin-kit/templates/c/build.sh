#!/usr/bin/env bash
# Builds {{name}} into {{file}}.wasm, a WebAssembly component of mcpproxy's {{world}} world:
#   1. wit-bindgen writes C bindings for the world from wit/ (into gen/);
#   2. clang (--target=wasm32-wasi, wasi-libc, lld) compiles src/plugin.c and the bindings
#      into a core module, a WASI preview1 reactor;
#   3. wasm-tools component new wraps it into a component, with wasmtime's WASI preview1
#      reactor adapter.
# Needs clang and lld with a wasm32 target, wasi-libc and the wasm32 compiler-rt builtins
# (Debian/Ubuntu: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32; or the
# wasi-sdk with CC=$WASI_SDK_PATH/bin/clang). wit-bindgen, wasm-tools and the adapter are
# taken from $C_TOOLS (default: .c-tools here) and installed there with cargo when missing
# (pinned versions; a few minutes the first time).
set -euo pipefail
cd "$(dirname "$0")"
CC="${CC:-clang}"
tools="${C_TOOLS:-$PWD/.c-tools}"
WIT_BINDGEN_VERSION=0.61.1
WASM_TOOLS_VERSION=1.258.3
ADAPTER_VERSION=48.0.8

if ! command -v "$CC" >/dev/null || ! command -v wasm-ld >/dev/null; then
    echo "build.sh: needs clang and wasm-ld (lld) with a wasm32 target and wasi-libc;" \
         "e.g. apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
    exit 1
fi

cargo_install() { # crate version binary [cargo install options...]
    local crate="$1" version="$2" binary="$3"
    shift 3
    if [ -x "$tools/bin/$binary" ] && "$tools/bin/$binary" --version | grep -qF " $version"; then
        return
    fi
    echo "installing $crate $version into $tools (cargo install, a few minutes)"
    env -u CARGO_TARGET_DIR cargo install --locked --quiet --root "$tools" "$crate@$version" "$@"
}
cargo_install wit-bindgen-cli "$WIT_BINDGEN_VERSION" wit-bindgen --no-default-features --features c
cargo_install wasm-tools "$WASM_TOOLS_VERSION" wasm-tools --no-default-features --features component

adapter="$tools/wasi_snapshot_preview1.reactor-$ADAPTER_VERSION.wasm"
if [ ! -s "$adapter" ]; then
    echo "fetching the WASI preview1 reactor adapter of wasmtime $ADAPTER_VERSION (cargo)"
    project="$tools/adapter-$ADAPTER_VERSION"
    mkdir -p "$project/src"
    cat > "$project/Cargo.toml" <<TOML
[package]
name = "write-adapter"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"

[workspace]
TOML
    cat > "$project/src/main.rs" <<'RUST'
// Writes the WASI preview1 reactor adapter's bytes to the path given.
fn main() {
    let out = std::env::args().nth(1).expect("usage: write-adapter OUT");
    let bytes = wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
    std::fs::write(&out, bytes).expect("write the adapter");
}
RUST
    (cd "$project" && CARGO_TARGET_DIR="$project/target" cargo run --quiet -- "$adapter.tmp")
    mv "$adapter.tmp" "$adapter"
fi

rm -rf gen
"$tools/bin/wit-bindgen" c wit --world {{world}} --out-dir gen >/dev/null
"$CC" --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-debug -std=c11 -Wall -Wextra \
    -Wno-unused-parameter -I gen \
    src/plugin.c gen/{{world_c}}.c gen/{{world_c}}_component_type.o -o {{file}}.core.wasm
"$tools/bin/wasm-tools" component new {{file}}.core.wasm \
    --adapt "wasi_snapshot_preview1=$adapter" -o {{file}}.wasm
rm -f {{file}}.core.wasm
echo "built {{file}}.wasm"
