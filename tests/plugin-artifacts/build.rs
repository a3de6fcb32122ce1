//! Builds every guest plugin of `plugins/` from source for `wasm32-wasip2` (the embedded
//! defaults and the test fixtures) and tells this crate where the components are
//! (`PLUGIN_ARTIFACTS_DIR`). Only tests and benchmarks depend on this crate, so the proxy's
//! own build never waits for it.

use std::env;
use std::path::PathBuf;

#[path = "../../crates/plugin-host/guests.rs"]
mod guests;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = guests::workspace_root(&manifest_dir);
    guests::rerun_if_sources_change(&root);
    let artifacts = guests::build_in_build_script(&root).unwrap_or_else(|e| fail(&e));
    println!(
        "cargo::rustc-env=PLUGIN_ARTIFACTS_DIR={}",
        artifacts.display()
    );
}

fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    std::process::exit(1);
}
