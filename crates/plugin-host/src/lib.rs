//! Plugins: WebAssembly components that carry mcpproxy's policy.
//!
//! This module owns loading components (embedded defaults and `--plugins DIR`), telling
//! which world each implements, and running them safely: a fresh instance per call from a
//! pre-instantiated template, a deadline, a memory cap and no capabilities (WASI is linked,
//! empty: clocks and randomness only, stdout and stderr into the log). A plugin
//! that traps, overruns its deadline or its memory fails *closed*: the call it was judging
//! gets a [`PluginFault`] naming the plugin and what happened, and nothing else is affected.
//!
//! The contract is `wit/` (package `mcpproxy:plugin@0.1.0`); `bindings` is the only place
//! that sees generated code, `conv` maps it to the types of [`mcpproxy_policy`]. `stages`
//! makes loaded components the pipeline's [`mcpproxy_policy::Annotator`]s and
//! [`mcpproxy_policy::Validator`]s; `sink` makes them [`mcpproxy_activity::Sink`]s.
//! Parts: `engine` (wasmtime, compile cache, stores), `loader` (load, identify, call),
//! `warm_pool` (reused instances), `host` (the imports a plugin gets), `wasi` (the empty
//! WASI of validators, annotators and scanners), `limits`
//! (enforcement), `suite` (conformance suites for `plugins check`), `cases` (an author's own
//! cases for `plugins check --cases`), `template` (`plugins wit` and `plugins new`).

mod bindings;
pub mod cases;
mod conv;
mod deadline;
mod embedded;
mod engine;
mod host;
mod limits;
mod loader;
mod memory;
mod sink;
mod slots;
mod stages;
pub mod suite;
pub mod template;
mod warm_pool;
mod wasi;

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

pub use engine::{CacheOutcome, EngineOptions, PluginEngine};
pub use limits::{Bytes, MemoryCapExceeded};
pub use loader::{Plugin, PluginSet, PluginSettings};
pub use mcpproxy_policy::Limits;
pub use memory::{limit_arenas as limit_malloc_arenas, release_freed as release_freed_memory};
pub use stages::{annotators, validators};

/// The plugin-name rule, shared by the loader, the templates and the config check: 1 to 64 of
/// `[a-z0-9-]`, not starting or ending with `-`.
pub fn is_plugin_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The plugin worlds of `wit/worlds.wit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    Annotator,
    Validator,
    Sink,
    Scanner,
}

impl PluginKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Annotator => "annotator",
            Self::Validator => "validator",
            Self::Sink => "sink",
            Self::Scanner => "scanner",
        }
    }

    /// The deadline a plugin of this kind gets unless its `plugin_limits` entry sets one:
    /// validators and annotators are on every call's path; sinks and scanners are not.
    pub fn default_timeout(self) -> std::time::Duration {
        match self {
            Self::Annotator | Self::Validator => Limits::DEFAULT_TIMEOUT,
            Self::Sink => Limits::DEFAULT_SINK_TIMEOUT,
            Self::Scanner => Limits::DEFAULT_SCANNER_TIMEOUT,
        }
    }

    /// `a validator`, `an annotator`, `a sink`.
    pub fn with_article(self) -> &'static str {
        match self {
            Self::Annotator => "an annotator",
            Self::Validator => "a validator",
            Self::Sink => "a sink",
            Self::Scanner => "a scanner",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a plugin was loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// Built into the binary.
    Embedded,
    /// Loaded from a file.
    File(PathBuf),
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Embedded => f.write_str("embedded"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Serialize for PluginSource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What `plugins list` shows about a plugin.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    pub name: String,
    pub kind: PluginKind,
    pub version: String,
    pub description: String,
    pub source: PluginSource,
    pub size_bytes: usize,
    /// Whether this start compiled the component or found it in the cache.
    pub compile: CacheOutcome,
    /// An embedded plugin that is active only when the config names it (the sinks, the
    /// strict `safety-routing` validator).
    pub opt_in: bool,
}

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
         exports mcpproxy:plugin/validator, /annotator, /scanner or /sink at version 0.1.0 (see docs/plugins.md)"
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
    Info { origin: String, fault: Fault },
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
pub enum Fault {
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

/// A [`Fault`] with the plugin it happened in: what a fail-closed rejection reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} plugin '{plugin}' {fault}")]
pub struct PluginFault {
    pub plugin: String,
    pub kind: PluginKind,
    pub fault: Fault,
}
