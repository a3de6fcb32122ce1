//! `http-sink`: an activity sink, a WebAssembly component of the `ndjson-sink-plugin` world.
//! It posts each batch as NDJSON (each record's JSON on its own line, as the journal keeps it
//! and hands it over) to the `url` setting: a SIEM webhook, Splunk HEC's raw endpoint, Vector,
//! Fluent Bit, Logstash... Any 2xx status means stored; anything else is an error, and
//! mcpproxy retries the batch later.
//!
//! Settings are in [`settings`], the meaning of a status in [`ndjson`], the HTTP
//! client over `wasi:http` in [`http`] (shared with `clickhouse-sink` and the sink fixture).
//! Nothing is kept between calls.

mod http;
mod ndjson;
mod settings;

wit_bindgen::generate!({
    path: "../../wit",
    world: "ndjson-sink-plugin",
    generate_all,
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

export!(HttpSink);
