//! `http-sink`: an activity sink, a WebAssembly component of the `ndjson-sink-plugin` world.
//! It posts each batch as NDJSON (each record's JSON on its own line, as the journal keeps it
//! and hands it over) to the `url` setting: a SIEM webhook, Splunk HEC's raw endpoint, Vector,
//! Fluent Bit, Logstash... Any 2xx status means stored; anything else is an error, and
//! mcpproxy retries the batch later.
//!
//! Settings, the meaning of a status and the HTTP client over `wasi:http` are in the
//! `sink-support` crate (shared with `clickhouse-sink` and the sink fixture), whose
//! `wasi:*` bindings this world's imports map to. Nothing is kept between calls.

use sink_support::{http, ndjson, settings};

wit_bindgen::generate!({
    path: "../../wit",
    world: "ndjson-sink-plugin",
    with: {
        "wasi:http/types@0.2.12": sink_support::bindings::wasi::http::types,
        "wasi:http/outgoing-handler@0.2.12": sink_support::bindings::wasi::http::outgoing_handler,
        "wasi:io/error@0.2.12": sink_support::bindings::wasi::io::error,
        "wasi:io/poll@0.2.12": sink_support::bindings::wasi::io::poll,
        "wasi:io/streams@0.2.12": sink_support::bindings::wasi::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": sink_support::bindings::wasi::clocks::monotonic_clock,
    },
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::ndjson_sink::{self, NdjsonBatch};
use mcpproxy::plugin::host::{self, LogLevel};

struct HttpSink;

impl metadata::Guest for HttpSink {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "http-sink".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            description: "Posts the activity log as NDJSON to an HTTP endpoint (SIEM, Splunk HEC, \
                          log shippers)"
                .to_string(),
        }
    }
}

impl ndjson_sink::Guest for HttpSink {
    /// The journal's lines are already NDJSON: they go out as the request body unchanged.
    fn deliver(batch: NdjsonBatch) -> Result<(), String> {
        if batch.lines.is_empty() {
            return Ok(());
        }
        let settings = settings::parse(&host::config())?;
        let records = batch.records as usize;
        let response = http::send(&http::Request {
            method: &settings.method,
            target: &settings.target,
            headers: &settings.headers,
            body: &batch.lines,
            timeouts: settings.timeouts,
        })?;
        ndjson::outcome(
            &settings.target.display(),
            response.status,
            &http::excerpt(&response.body, ndjson::ERROR_EXCERPT_BYTES),
            records,
        )?;
        host::log(
            LogLevel::Trace,
            &format!(
                "delivered {records} record(s) ({} to {}), {} bytes, to {}: {}",
                batch.first_id,
                batch.last_id,
                batch.lines.len(),
                settings.target.display(),
                response.status
            ),
        );
        Ok(())
    }
}

/// The component's exports: wit-bindgen's glue from the canonical ABI to [`HttpSink`].
#[allow(
    unsafe_code,
    reason = "the glue `export!` expands to is unsafe by nature (it reads the guest's memory as \
              the canonical ABI lays it out); the code of this crate has none"
)]
mod component_exports {
    use super::HttpSink;

    crate::export!(HttpSink with_types_in crate);
}
