//! `telemetry`: the OTLP trace export. Off unless `otlp_endpoint` is given; the other keys
//! without it are refused rather than silently ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::raw;
use super::Context;
use super::servers::{check_url, is_header_name};
use crate::{OtlpConfig, Result, TelemetryConfig};

/// The longest `telemetry.service_name`.
const MAX_SERVICE_NAME_LEN: usize = 128;

pub(super) fn telemetry_from(raw: raw::RawTelemetry, ctx: &Context<'_>) -> Result<TelemetryConfig> {
    let Some(endpoint) = raw.otlp_endpoint else {
        let given = [
            ("otlp_headers", raw.otlp_headers.is_some()),
            ("service_name", raw.service_name.is_some()),
            ("sample_ratio", raw.sample_ratio.is_some()),
            ("export_interval_ms", raw.export_interval_ms.is_some()),
        ];
        if let Some((key, _)) = given.iter().find(|(_, set)| *set) {
            return Err(ctx.err(
                &format!("telemetry.{key}"),
                "has no effect without telemetry.otlp_endpoint (the collector's OTLP/HTTP \
                 address, e.g. http://127.0.0.1:4318): set it to export traces, or remove this key",
            ));
        }
        return Ok(TelemetryConfig::default());
    };
    check_url(&endpoint).map_err(|m| ctx.err("telemetry.otlp_endpoint", m))?;
    let mut headers = BTreeMap::new();
    for (name, value) in raw.otlp_headers.unwrap_or_default() {
        let key = format!("telemetry.otlp_headers.{name}");
        if !is_header_name(&name) {
            return Err(ctx.err(
                &key,
                "is not a valid header name: use letters, digits and - (e.g. x-api-key)",
            ));
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(ctx.err(&key, "the value must not contain control characters"));
        }
        headers.insert(name, value);
    }
    let service_name = match raw.service_name {
        Some(name) => {
            if name.is_empty()
                || name.len() > MAX_SERVICE_NAME_LEN
                || name.chars().any(|c| c.is_control())
            {
                return Err(ctx.err(
                    "telemetry.service_name",
                    format!(
                        "use 1 to {MAX_SERVICE_NAME_LEN} printable characters (e.g. mcpproxy-laptop)"
                    ),
                ));
            }
            name
        }
        None => OtlpConfig::DEFAULT_SERVICE_NAME.to_owned(),
    };
    let sample_ratio = match raw.sample_ratio {
        Some(r) if (0.0..=1.0).contains(&r) => r,
        Some(r) => {
            return Err(ctx.err(
                "telemetry.sample_ratio",
                format!("{r} is out of range: use 0.0 (no call traced) to 1.0 (every call)"),
            ));
        }
        None => 1.0,
    };
    let export_interval = match raw.export_interval_ms {
        Some(ms) => Duration::from_millis(ctx.range(
            "telemetry.export_interval_ms",
            ms,
            10,
            600_000,
            " milliseconds (10 minutes)",
        )?),
        None => OtlpConfig::DEFAULT_EXPORT_INTERVAL,
    };
    Ok(TelemetryConfig {
        otlp: Some(OtlpConfig {
            traces_url: traces_url(&endpoint),
            headers,
            service_name,
            sample_ratio,
            export_interval,
        }),
    })
}

/// The endpoint as written if it has a path, else with the OTLP traces path added.
fn traces_url(endpoint: &str) -> String {
    let after_scheme = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    match after_scheme.find('/') {
        Some(i) if after_scheme[i..] != *"/" => endpoint.to_owned(),
        _ => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_only_to_a_bare_address() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://otlp.example.com/api/v1/traces"),
            "https://otlp.example.com/api/v1/traces"
        );
    }
}
