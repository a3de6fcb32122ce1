//! `sink-support`: what the sink plugins share: an HTTP/1.1 client over
//! `wasi:http/outgoing-handler` ([`http`]), the meaning of a response to a batch of NDJSON
//! ([`ndjson`]) and the settings of a sink that posts NDJSON to a URL ([`settings`]:
//! `http-sink`'s, which the `test-sink-misbehave` fixture takes too). `http-sink`,
//! `clickhouse-sink` and `fixtures/sink-misbehave` depend on it.
//!
//! The crate owns the `wasi:http`, `wasi:io` and `wasi:clocks` bindings ([`bindings`]): a
//! sink's own `wit_bindgen::generate!` maps those interfaces here with `with`, so the sink
//! and this client speak the same generated types and the component imports each interface
//! once. Everything that does not touch the bindings (URL parsing, timeouts, settings, error
//! wording) is plain Rust with native unit tests.

#![warn(missing_docs)]

/// The bindings of `wasi:http/outgoing-handler@0.2.12` and the interfaces it uses, generated
/// from the WASI packages the plugin contract carries (`wit/deps`). A sink maps its world's
/// `wasi:*` imports to these modules (see `http-sink/src/lib.rs`).
#[allow(
    missing_docs,
    reason = "generated code: the WIT documents what it documents, and no more"
)]
#[allow(
    unsafe_code,
    reason = "generated code: the canonical ABI of the imports is unsafe by nature"
)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "
            package mcpproxy:sink-support;

            world http-client {
                import wasi:http/outgoing-handler@0.2.12;
            }
        ",
        world: "mcpproxy:sink-support/http-client",
        generate_all,
    });
}

pub mod http;
pub mod ndjson;
pub mod settings;
