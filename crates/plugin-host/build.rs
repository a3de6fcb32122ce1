//! Builds the guest plugins in `plugins/` for `wasm32-wasip2` and puts the default ones
//! where `src/embedded.rs` includes them (the opt-in `safety-routing` among them). The test
//! fixtures are built too; the artifact directory is exported to this crate's tests as
//! `MCPPROXY_PLUGIN_ARTIFACTS`, and to the build scripts of the crates that depend on this
//! one as `DEP_MCPPROXY_PLUGINS_ARTIFACTS` (the `links` key of Cargo.toml).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";
/// The plugins embedded in the binary (crate names, as cargo names their artifacts).
const EMBEDDED: &[&str] = &[
    "intent_matrix",
    "prefix_annotator",
    "clickhouse_sink",
    "http_sink",
    "safety_routing",
    "tool_scanner",
    "secret_redactor",
    "injection_marker",
    "code_runtime",
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .ancestors()
        .nth(2)
        .expect("crates/plugin-host lives two levels below the workspace root");
    let plugins = root.join("plugins");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));

    for watched in [
        "Cargo.toml",
        "Cargo.lock",
        "intent-matrix",
        "prefix-annotator",
        "safety-routing",
        "tool-scanner",
        "clickhouse-sink",
        "http-sink",
        "secret-redactor",
        "injection-marker",
        "code-runtime",
        "group-gate",
        "sink-support",
        "tool-scan",
        "fixtures",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            plugins.join(watched).display()
        );
    }
    println!("cargo::rerun-if-changed={}", root.join("wit").display());

    ensure_target_installed();

    // A target dir of its own: the outer cargo holds the lock on the main one.
    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("wasm-plugins");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&plugins)
        .args(["build", "--release", "--workspace", "--target", TARGET])
        .arg("--target-dir")
        .arg(&target_dir);
    // Flags meant for the host build must not leak into the guest build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run cargo to build plugins/: {e}")));
    if !status.success() {
        fail("building the plugins in plugins/ for wasm32-wasip2 failed (see the errors above)");
    }

    let artifacts = target_dir.join(TARGET).join("release");
    for name in EMBEDDED {
        let from = artifacts.join(format!("{name}.wasm"));
        let to = out_dir.join(format!("{name}.wasm"));
        std::fs::copy(&from, &to).unwrap_or_else(|e| {
            fail(&format!(
                "cannot copy {} to {}: {e}",
                from.display(),
                to.display()
            ))
        });
    }
    println!(
        "cargo::rustc-env=MCPPROXY_PLUGIN_ARTIFACTS={}",
        artifacts.display()
    );
    println!("cargo::metadata=artifacts={}", artifacts.display());
}

/// Makes sure the wasm target is installed: where rustup manages the toolchain, adds it
/// (saying so), since rustup installs `rust-toolchain.toml`'s targets only when it installs
/// the toolchain itself; otherwise stops the build with instructions.
fn ensure_target_installed() {
    if target_installed() {
        return;
    }
    if let Some(outcome) = add_target_with_rustup() {
        match outcome {
            Ok(()) if target_installed() => {
                println!(
                    "cargo::warning=the {TARGET} target was missing; added it with \
                     `rustup target add {TARGET}` (the default plugins are built for it)"
                );
                return;
            }
            Ok(()) => {}
            Err(e) => println!("cargo::warning=`rustup target add {TARGET}` failed: {e}"),
        }
    }
    fail(
        "the wasm32-wasip2 target is not installed, and mcpproxy's default plugins are \
         built for it. Run `rustup target add wasm32-wasip2` (with rustup, the \
         rust-toolchain.toml in the repository root lists it), then build again.",
    );
}

fn target_installed() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    Command::new(&rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|dir| Path::is_dir(&dir))
}

/// Runs `rustup target add` for the toolchain this build uses. `None` when rustup is not
/// what runs this toolchain (no `RUSTUP_TOOLCHAIN`, or no `rustup` on the PATH).
fn add_target_with_rustup() -> Option<Result<(), String>> {
    let toolchain = env::var("RUSTUP_TOOLCHAIN").ok()?;
    let output = Command::new("rustup")
        .args(["target", "add", "--toolchain", &toolchain, TARGET])
        .output()
        .ok()?;
    if output.status.success() {
        Some(Ok(()))
    } else {
        Some(Err(String::from_utf8_lossy(&output.stderr)
            .trim()
            .to_owned()))
    }
}

fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    std::process::exit(1);
}
