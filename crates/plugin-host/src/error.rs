//! How loading a plugin fails ([`Error`]: each names the file and says how to fix it), and
//! how one call into a plugin fails ([`CallFault`], and [`PluginFault`] with the plugin's
//! name: what a fail-closed rejection reports).

use std::path::PathBuf;

use crate::PluginKind;
use crate::limits::MemoryCapExceeded;

/// Why a plugin could not be loaded. Each names the file (or embedded plugin) and says how
/// to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read plugin {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read plugin directory {path}: {source}")]
    ReadDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin} is not a WebAssembly file (it does not start with the `\\0asm` magic bytes)")]
    NotWasm { origin: String },
    #[error(
        "{origin} is a core WebAssembly module, not a component: build it with \
         `cargo build --target wasm32-wasip2`, or wrap it with `wasm-tools component new`"
    )]
    CoreModule { origin: String },
    #[error("{origin} failed to compile: {reason}")]
    Compile { origin: String, reason: String },
    #[error(
        "{origin} implements none of the mcpproxy plugin worlds: it exports {exports}; a plugin \
         exports mcpproxy:plugin/validator, /annotator, /scanner, /sink, /ndjson-sink or \
         /result-guard at a 0.1.x version (see docs/plugins.md)"
    )]
    NoWorld { origin: String, exports: String },
    #[error(
        "{origin} exports more than one plugin interface ({kinds}); a plugin implements exactly one world"
    )]
    SeveralWorlds { origin: String, kinds: String },
    #[error("{origin} does not match the {world} world: {reason}")]
    WorldMismatch {
        origin: String,
        world: &'static str,
        reason: String,
    },
    #[error("{origin}: calling its metadata.info() failed: {fault}")]
    Info { origin: String, fault: CallFault },
    #[error(
        "{origin}: plugin name '{name}' is not valid: use 1 to 64 lowercase letters, digits and '-'"
    )]
    BadName { origin: String, name: String },
    #[error("two plugins are named '{name}': {first} and {second}; remove one or change its name")]
    DuplicateName {
        name: String,
        first: String,
        second: String,
    },
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
}

/// What went wrong inside one plugin call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFault {
    #[error("ran past its deadline of {} ms and was stopped", .0.as_millis())]
    Deadline(std::time::Duration),
    #[error("{0}")]
    Memory(MemoryCapExceeded),
    #[error("trapped: {0}")]
    Trap(String),
    #[error("could not be started: {0}")]
    Instantiate(String),
    /// Every instance slot stayed in use for the whole wait: the proxy, not the plugin, is
    /// the cause.
    #[error(
        "found all {slots} WebAssembly instance slots busy for {} s (mcpproxy is overloaded)",
        wait.as_secs()
    )]
    Overloaded {
        slots: u32,
        wait: std::time::Duration,
    },
}

/// A [`CallFault`] with the plugin it happened in: what a fail-closed rejection reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} plugin '{plugin}' {fault}")]
pub struct PluginFault {
    pub plugin: String,
    pub kind: PluginKind,
    pub fault: CallFault,
}
