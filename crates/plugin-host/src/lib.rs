//! Plugins: WebAssembly components that carry mcpproxy's policy.
//!
//! This module owns loading components (embedded defaults and `--plugins DIR`), telling
//! which world each implements, and running them safely: a fresh instance per call from a
//! pre-instantiated template, a deadline, a memory cap and no capabilities (WASI is linked,
//! empty: clocks and randomness only, stdout and stderr into the log). A plugin
//! that traps, overruns its deadline or its memory fails *closed*: the call it was judging
//! gets a [`PluginFault`] naming the plugin and what happened, and nothing else is affected.
//!
//! The contract is `wit/` (package `mcpproxy:plugin@0.1.1`; components built against any
//! `0.1.x`, 0.1.0 included, load); `bindings` is the only place
//! that sees generated code, `conv` maps it to the types of [`mcpproxy_policy`]. `stages`
//! makes loaded components the pipeline's [`mcpproxy_policy::Annotator`]s and
//! [`mcpproxy_policy::Validator`]s; `sink` makes them [`mcpproxy_activity::Sink`]s.
//! Parts: `engine` (wasmtime, compile cache, stores), `loader` (load, identify, call),
//! `warm_pool` (reused instances), `host` (the imports a plugin gets), `wasi` (the empty
//! WASI of validators, annotators and scanners), `limits`
//! (enforcement), `script` (the JavaScript runtime of `code_execution`). The author's kit
//! (suites, cases, templates) is `mcpproxy-plugin-kit`, above this crate.

mod bindings;
mod conv;
mod deadline;
mod embedded;
mod engine;
mod error;
mod host;
mod identity;
mod limits;
mod loader;
mod memory;
mod script;
mod sink;
mod slots;
mod stages;
mod warm_pool;
mod wasi;

pub use embedded::{embedded_component, embedded_names};
pub use engine::{CacheOutcome, EngineOptions, PluginEngine};
pub use error::{CallFault, Error, PluginFault};
pub use identity::{PluginInfo, PluginKind, PluginSource};
pub use limits::{Bytes, MemoryCapExceeded};
pub use loader::{Plugin, PluginSet, PluginSettings};
pub use mcpproxy_policy::Limits;
pub use memory::{
    limit_arenas as limit_malloc_arenas, release_code_pages, release_freed as release_freed_memory,
};
pub use script::{ScriptEnd, ScriptHost, ScriptLimits, ScriptRun, ScriptRuntime, ScriptStop};
pub use stages::{annotators, result_guards, validators};
