#!/usr/bin/env bash
# Builds the tool-gate validator (C) into a WebAssembly component of mcpproxy's
# validator-plugin world, from source:
#   1. wit-bindgen writes C bindings for the world from wit/;
#   2. clang (--target=wasm32-wasi, wasi-libc, lld) compiles src/*.c and the bindings into
#      a core module, a WASI preview1 reactor;
#   3. wasm-tools component new wraps it into a component, with wasmtime's WASI preview1
#      reactor adapter (from the crate wasi-preview1-component-adapter-provider).
# What is missing is installed first, and kept for the next run:
#   * clang, lld, wasi-libc, libclang-rt-14-dev-wasm32 with apt-get (Debian bookworm's;
#     needs root or sudo, else it says what to install);
#   * wit-bindgen-cli and wasm-tools with `cargo install --locked` at pinned versions, and
#     the adapter's bytes, under $MCPPROXY_C_TOOLS (default: target/c-toolchain, or
#     $CARGO_TARGET_DIR/c-toolchain when that is set).
#
#   bash plugins/examples/c-tool-gate/build.sh [OUT.wasm]
# Default output: target/c-example/tool_gate.wasm (in the repository root).
# MCPPROXY_WIT=DIR builds against another copy of the contract (default: the repository's wit/).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$root/target/c-example/tool_gate.wasm}"
wit="${MCPPROXY_WIT:-$root/wit}"
tools="${MCPPROXY_C_TOOLS:-${CARGO_TARGET_DIR:-$root/target}/c-toolchain}"

# Pinned: wit-bindgen as the repository's Rust plugins use it (plugins/Cargo.lock), the
# wasm-tools of the same wit-component line, and the adapter of the host's wasmtime.
WIT_BINDGEN_VERSION=0.61.1
WASM_TOOLS_VERSION=1.258.3
ADAPTER_VERSION=48.0.8
APT_PACKAGES=(clang lld wasi-libc libclang-rt-14-dev-wasm32)

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null; then sudo "$@"
    else return 1
    fi
}

# --- clang, lld and wasi-libc --------------------------------------------------------------
if ! command -v clang >/dev/null || ! command -v wasm-ld >/dev/null \
    || [ ! -f /usr/lib/wasm32-wasi/crt1-reactor.o ] \
    || ! compgen -G '/usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a' >/dev/null; then
    echo "installing ${APT_PACKAGES[*]} (apt-get)"
    apt_install() {
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            "${APT_PACKAGES[@]}"
    }
    if ! command -v apt-get >/dev/null; then
        echo "build.sh: needs clang and lld with a wasm32 target, wasi-libc and the wasm32" \
             "compiler-rt builtins; install them with your package manager" >&2
        exit 1
    fi
    apt_install || { as_root apt-get update && apt_install; } || {
        echo "build.sh: could not install ${APT_PACKAGES[*]}; run as root (or with sudo):" \
             "apt-get install ${APT_PACKAGES[*]}" >&2
        exit 1
    }
fi

# --- wit-bindgen and wasm-tools (cargo install, pinned, cached in $tools) -----------------------
# cargo install builds in a temporary directory of its own, not in CARGO_TARGET_DIR.
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

# --- the WASI preview1 reactor adapter --------------------------------------------------------
adapter="$tools/wasi_snapshot_preview1.reactor-$ADAPTER_VERSION.wasm"
if [ ! -s "$adapter" ]; then
    echo "fetching wasi-preview1-component-adapter-provider $ADAPTER_VERSION (cargo)"
    project="$tools/adapter-$ADAPTER_VERSION"
    mkdir -p "$project/src"
    cat > "$project/Cargo.toml" <<EOF
[package]
name = "write-adapter"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER_VERSION"

[workspace]
EOF
    cat > "$project/src/main.rs" <<'EOF'
// Writes the WASI preview1 reactor adapter's bytes to the path given.
fn main() {
    let out = std::env::args().nth(1).expect("usage: write-adapter OUT");
    let bytes = wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
    std::fs::write(&out, bytes).expect("write the adapter");
}
EOF
    (cd "$project" && CARGO_TARGET_DIR="$project/target" cargo run --quiet -- "$adapter.tmp")
    mv "$adapter.tmp" "$adapter"
fi

# --- the build ----------------------------------------------------------------------------
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
"$tools/bin/wit-bindgen" c "$wit" --world validator-plugin --out-dir "$build/bindings" >/dev/null
# --strip-debug: wasi-libc carries debug info, two thirds of the module otherwise.
clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wl,--strip-debug -std=c11 -Wall -Wextra -Werror \
    -Wno-unused-parameter -I "$build/bindings" \
    "$here"/src/*.c "$build/bindings"/*.c "$build/bindings"/*_component_type.o \
    -o "$build/core.wasm"
mkdir -p "$(dirname "$out")"
"$tools/bin/wasm-tools" component new "$build/core.wasm" \
    --adapt "wasi_snapshot_preview1=$adapter" -o "$out.tmp"
mv "$out.tmp" "$out"
echo "built $out"
