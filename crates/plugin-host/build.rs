//! Puts the components of the plugins the proxy embeds where `src/embedded.rs`,
//! `src/script.rs` and the sink runner include them: the committed ones of
//! `plugins/prebuilt/` while the plugins' sources are those they were built from (no nested
//! build, no `wasm32-wasip2` target needed), otherwise, or with
//! `MCPPROXY_PLUGINS_FROM_SOURCE=1`, a build of `plugins/` from source.
//!
//! A test (`tests/prebuilt.rs`) rebuilds them from source and fails when the bytes differ, so
//! the committed components are what the sources build.

use std::env;
use std::path::{Path, PathBuf};

#[path = "guests.rs"]
mod guests;

/// Set to `1` to build the embedded plugins from source even when the committed ones match.
const FROM_SOURCE: &str = "MCPPROXY_PLUGINS_FROM_SOURCE";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = guests::workspace_root(&manifest_dir);
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));

    // A change to any source of the guests reruns this script, which then compares the
    // sources' digest with the committed manifest.
    guests::rerun_if_sources_change(&root);
    println!("cargo::rerun-if-env-changed={FROM_SOURCE}");

    let forced = env::var(FROM_SOURCE).is_ok_and(|v| v == "1");
    let stale = if forced {
        None
    } else {
        guests::prebuilt_unusable(&root)
    };
    let from = if !forced && stale.is_none() {
        root.join(guests::PREBUILT_DIR)
    } else {
        if let Some(reason) = stale {
            println!(
                "cargo::warning=building the embedded plugins from source: {reason}. \
                 Refresh {} with `MCPPROXY_UPDATE_PREBUILT=1 cargo test -p \
                 mcpproxy-plugin-host --test prebuilt` (docs/plugins.md)",
                guests::PREBUILT_DIR
            );
        }
        guests::build_in_build_script(&root).unwrap_or_else(|e| fail(&e))
    };
    copy_embedded(&from, &out_dir);
}

/// Puts each embedded component from `from` into `OUT_DIR`, deflated (`NAME.wasm.deflate`,
/// raw DEFLATE at miniz's best level; `src/embedded.rs` inflates it): components compress
/// ~3x, and the binary carries them whether or not they are used.
fn copy_embedded(from: &Path, out_dir: &Path) {
    for name in guests::EMBEDDED {
        let source = from.join(format!("{name}.wasm"));
        let to = out_dir.join(format!("{name}.wasm.deflate"));
        let bytes = std::fs::read(&source)
            .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", source.display())));
        let deflated = miniz_oxide::deflate::compress_to_vec(&bytes, 10);
        std::fs::write(&to, deflated)
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", to.display())));
    }
}

fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    std::process::exit(1);
}
