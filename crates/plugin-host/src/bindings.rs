//! The `bindgen!` expansions of the `mcpproxy:plugin` worlds in `wit/`: the only place that
//! sees generated code; `conv` and `sink::record` map it to the crate's own types.
//!
//! One expansion per world we run. The validator world generates the shared `types` and
//! `host` interfaces; the annotator, scanner and both sink worlds reuse them through `with`, so
//! every kind speaks the same Rust types. The sink worlds map `wasi:http`, `wasi:io` and
//! `wasi:clocks` to wasmtime-wasi(-http)'s own bindings, which `plugin::sink` links.

pub(crate) mod validator_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "validator-plugin",
    });
}

pub(crate) mod annotator_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "annotator-plugin",
        with: {
            "mcpproxy:plugin/types": crate::bindings::validator_world::mcpproxy::plugin::types,
            "mcpproxy:plugin/host": crate::bindings::validator_world::mcpproxy::plugin::host,
        },
    });
}

pub(crate) mod scanner_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "scanner-plugin",
        with: {
            "mcpproxy:plugin/types": crate::bindings::validator_world::mcpproxy::plugin::types,
            "mcpproxy:plugin/host": crate::bindings::validator_world::mcpproxy::plugin::host,
        },
    });
}

pub(crate) mod sink_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "sink-plugin",
        with: {
            "mcpproxy:plugin/types": crate::bindings::validator_world::mcpproxy::plugin::types,
            "mcpproxy:plugin/host": crate::bindings::validator_world::mcpproxy::plugin::host,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::sync::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
        require_store_data_send: true,
    });
}

/// The sink world that takes JSON lines; the same mappings as `sink_world`.
pub(crate) mod ndjson_sink_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "ndjson-sink-plugin",
        with: {
            "mcpproxy:plugin/host": crate::bindings::validator_world::mcpproxy::plugin::host,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::sync::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
        require_store_data_send: true,
    });
}

/// The result-guard world (`wit/result-guard.wit`); the same mappings as `scanner_world`.
pub(crate) mod result_guard_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "result-guard-plugin",
        with: {
            "mcpproxy:plugin/types": crate::bindings::validator_world::mcpproxy::plugin::types,
            "mcpproxy:plugin/host": crate::bindings::validator_world::mcpproxy::plugin::host,
        },
    });
}

pub(crate) use annotator_world::exports::mcpproxy::plugin::annotator as wit_annotator;
pub(crate) use annotator_world::{AnnotatorPlugin, AnnotatorPluginPre};
pub(crate) use ndjson_sink_world::exports::mcpproxy::plugin::ndjson_sink as wit_ndjson_sink;
pub(crate) use ndjson_sink_world::{NdjsonSinkPlugin, NdjsonSinkPluginPre};
pub(crate) use result_guard_world::exports::mcpproxy::plugin::result_guard as wit_guard;
pub(crate) use result_guard_world::{ResultGuardPlugin, ResultGuardPluginPre};
pub(crate) use scanner_world::exports::mcpproxy::plugin::scanner as wit_scanner;
pub(crate) use scanner_world::{ScannerPlugin, ScannerPluginPre};
pub(crate) use sink_world::{SinkPlugin, SinkPluginPre};
pub(crate) use validator_world::exports::mcpproxy::plugin::metadata as wit_metadata;
pub(crate) use validator_world::mcpproxy::plugin::host as wit_host;
pub(crate) use validator_world::mcpproxy::plugin::types as wit_types;
pub(crate) use validator_world::{ValidatorPlugin, ValidatorPluginPre};

/// The exported interface names that identify each world (see `wit/worlds.wit`).
pub(crate) const VALIDATOR_EXPORT: &str = "mcpproxy:plugin/validator@0.1.1";
pub(crate) const ANNOTATOR_EXPORT: &str = "mcpproxy:plugin/annotator@0.1.1";
pub(crate) const SINK_EXPORT: &str = "mcpproxy:plugin/sink@0.1.1";
pub(crate) const NDJSON_SINK_EXPORT: &str = "mcpproxy:plugin/ndjson-sink@0.1.1";
pub(crate) const SCANNER_EXPORT: &str = "mcpproxy:plugin/scanner@0.1.1";
pub(crate) const RESULT_GUARD_EXPORT: &str = "mcpproxy:plugin/result-guard@0.1.1";
pub(crate) const METADATA_EXPORT: &str = "mcpproxy:plugin/metadata@0.1.1";

/// The `code-runtime` world of the internal package `mcpproxy:code` (`wit/code/`): the
/// JavaScript engine of `code_execution`, not a plugin world. `call-tool` may trap: that is
/// how the proxy stops a script (its call limit, say).
pub(crate) mod code_world {
    wasmtime::component::bindgen!({
        path: "../../wit/code",
        world: "code-runtime",
        imports: { "mcpproxy:code/host.call-tool": trappable },
    });
}
