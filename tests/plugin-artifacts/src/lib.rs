//! The guest plugins of `plugins/` as the tests and benchmarks load them: built from source
//! by this crate's build script (the embedded defaults and the test fixtures alike), in the
//! directory it names.

use std::path::{Path, PathBuf};

/// The directory of the components this crate's build script built.
pub const DIR: &str = env!("PLUGIN_ARTIFACTS_DIR");

/// Where the component of the plugin crate `crate_name` (`intent_matrix`, `trap`) is.
pub fn artifact(crate_name: &str) -> PathBuf {
    Path::new(DIR).join(format!("{crate_name}.wasm"))
}

/// The bytes of a plugin's component.
///
/// # Panics
///
/// When the file cannot be read: the build script built every guest, so a missing one is a
/// wrong name in a test.
pub fn artifact_bytes(crate_name: &str) -> Vec<u8> {
    let path = artifact(crate_name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}
