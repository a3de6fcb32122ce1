//! The compiled test plugins: where the plugin host's build script put them, and their
//! bytes.

#![allow(
    dead_code,
    reason = "shared helpers: each test module uses a different subset"
)]

use std::path::{Path, PathBuf};

/// Where crates/plugin-host/build.rs put the compiled plugins (defaults and test fixtures).
pub(crate) fn artifact(crate_name: &str) -> PathBuf {
    Path::new(env!("MCPPROXY_PLUGIN_ARTIFACTS")).join(format!("{crate_name}.wasm"))
}

/// The bytes of a compiled plugin.
pub(crate) fn artifact_bytes(crate_name: &str) -> Vec<u8> {
    let path = artifact(crate_name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}
