//! The `bindgen!` expansions of the `mcpproxy:plugin` policy worlds in `wit/` (the sink world
//! has its own in `plugin::sink`, which maps `wasi:http` to wasmtime-wasi-http).
//!
//! One expansion per world we run. The validator world generates the shared `types` and
//! `host` interfaces; the annotator world reuses them through `with`, so both kinds speak
//! the same Rust types. The sink world is recognised by its exports (see `loader`), and is
//! run by the sink delivery machinery, which links `wasi:http` itself.

pub(crate) mod validator_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "validator-plugin",
    });
}

pub(crate) mod annotator_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "annotator-plugin",
        with: {
            "mcpproxy:plugin/types": crate::plugin::bindings::validator_world::mcpproxy::plugin::types,
            "mcpproxy:plugin/host": crate::plugin::bindings::validator_world::mcpproxy::plugin::host,
        },
    });
}

pub(crate) use annotator_world::exports::mcpproxy::plugin::annotator as wit_annotator;
pub(crate) use annotator_world::{AnnotatorPlugin, AnnotatorPluginPre};
pub(crate) use validator_world::exports::mcpproxy::plugin::metadata as wit_metadata;
pub(crate) use validator_world::mcpproxy::plugin::host as wit_host;
pub(crate) use validator_world::mcpproxy::plugin::types as wit_types;
pub(crate) use validator_world::{ValidatorPlugin, ValidatorPluginPre};

/// The exported interface names that identify each world (see `wit/worlds.wit`).
pub(crate) const VALIDATOR_EXPORT: &str = "mcpproxy:plugin/validator@0.1.0";
pub(crate) const ANNOTATOR_EXPORT: &str = "mcpproxy:plugin/annotator@0.1.0";
pub(crate) const SINK_EXPORT: &str = "mcpproxy:plugin/sink@0.1.0";
pub(crate) const METADATA_EXPORT: &str = "mcpproxy:plugin/metadata@0.1.0";
