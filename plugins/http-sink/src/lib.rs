//! `http-sink`: an activity sink, a WebAssembly component of the `sink-plugin` world. It
//! posts each batch as NDJSON (each record's JSON on its own line) to the `url` setting: a
//! SIEM webhook, Splunk HEC's raw endpoint, Vector, Fluent Bit, Logstash... Any 2xx status
//! means stored; anything else is an error, and mcpproxy retries the batch later.
//!
//! Settings are in [`settings`], the body and the meaning of a status in [`ndjson`], the HTTP
//! client over `wasi:http` in [`http`] (shared with `clickhouse-sink` and the sink fixture).
//! Nothing is kept between calls.

mod http;
mod ndjson;
mod settings;

wit_bindgen::generate!({
    path: "../../wit",
    world: "sink-plugin",
    generate_all,
});

use exports::mcpproxy::plugin::metadata::{self, PluginInfo};
use exports::mcpproxy::plugin::sink;
use mcpproxy::plugin::host::{self, LogLevel};
use mcpproxy::plugin::types::ActivityRecord;

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

impl sink::Guest for HttpSink {
    fn deliver(batch: Vec<ActivityRecord>) -> Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        let settings = settings::parse(&host::config())?;
        let body = ndjson::body(batch.iter().map(|r| r.json.as_str()));
        let response = http::send(&http::Request {
            method: &settings.method,
            target: &settings.target,
            headers: &settings.headers,
            body: &body,
            timeouts: settings.timeouts,
        })?;
        ndjson::outcome(
            &settings.target.display(),
            response.status,
            &http::excerpt(&response.body, ndjson::ERROR_EXCERPT_BYTES),
            batch.len(),
        )?;
        host::log(
            LogLevel::Trace,
            &format!(
                "delivered {} record(s), {} bytes, to {}: {}",
                batch.len(),
                body.len(),
                settings.target.display(),
                response.status
            ),
        );
        Ok(())
    }
}

export!(HttpSink);
