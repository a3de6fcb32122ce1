//! `mcpproxy activity sinks`: each sink's delivery (state, backlog, lag, last delivery and
//! last error), from the running server, else from the journal's cursors.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::Value;

use mcpproxy_activity::format_timestamp;

use crate::cli::Globals;
use crate::cli::output::{Format, Tone, print_data, print_table_toned};

use super::store::{Source, Store, open};

#[derive(Debug, Args)]
pub(in crate::cli) struct SinksCommand {
    #[command(flatten)]
    source: Source,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl SinksCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open(&self.source, globals).await?;
        let sinks: Value = match &store {
            Store::Remote(remote) => remote.get("/activity/sinks", &[]).await?,
            Store::Local(journal) => {
                serde_json::to_value(mcpproxy_activity::offline_report(journal)?)?
            }
        };
        let list = sinks.as_array().cloned().unwrap_or_default();
        if print_data(&sinks, self.output)? {
        } else if list.is_empty() {
            eprintln!(
                "no sinks: add one to plugins.sinks in the config, or run `mcpproxy serve --sink NAME` (see docs/sinks.md)"
            );
        } else {
            {
                let rows: Vec<Vec<String>> = list.iter().map(sink_row).collect();
                print_table_toned(
                    &[
                        "SINK",
                        "STATE",
                        "BACKLOG",
                        "LAG",
                        "DELIVERED",
                        "LAST DELIVERY",
                        "LAST ERROR",
                    ],
                    &rows,
                    |column, cell| (column == 1).then(|| Tone::of_word(cell)).flatten(),
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// One sink as a row of the table: its state (with the retry and the batch limit), backlog,
/// lag, records delivered, last delivery, and last error (with failures and drops).
fn sink_row(s: &Value) -> Vec<String> {
    let ms = |v: &Value| v.as_u64();
    let when = |v: &Value| {
        ms(v).map_or("-".to_owned(), |t| {
            format_timestamp(t)
                .replace('T', " ")
                .chars()
                .take(19)
                .collect()
        })
    };
    let mut state = s["activity"].as_str().unwrap_or("-").replace('_', " ");
    if let Some(retry) = ms(&s["retry_in_ms"]) {
        state = format!("{state} (retry in {})", human_ms(retry));
    }
    if let Some(limit) = ms(&s["batch_limit"]) {
        state = format!("{state}, batches of {limit} (memory)");
    }
    let mut error = s["last_error"].as_str().unwrap_or("-").to_owned();
    if let Some(n) = ms(&s["failures"]).filter(|n| *n > 0) {
        error = format!("{error} ({n} failed attempts)");
    }
    if let Some(n) = ms(&s["dropped"]).filter(|n| *n > 0) {
        error = format!("{error}; {n} records dropped by retention");
    }
    vec![
        s["name"].as_str().unwrap_or("?").to_owned(),
        state,
        ms(&s["backlog"]).unwrap_or(0).to_string(),
        ms(&s["lag_ms"]).map_or("-".to_owned(), human_ms),
        ms(&s["delivered"]).unwrap_or(0).to_string(),
        when(&s["last_delivery_ms"]),
        error,
    ]
}

/// `850ms`, `12.3s`, `4m10s`, `2h05m`.
fn human_ms(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(human_ms(850), "850ms");
        assert_eq!(human_ms(12_340), "12.3s");
        assert_eq!(human_ms(250_000), "4m10s");
        assert_eq!(human_ms(7_500_000), "2h05m");
    }

    #[test]
    fn a_sink_row_shows_state_lag_and_errors() {
        let row = sink_row(&serde_json::json!({
            "name": "clickhouse-sink", "activity": "backing_off", "retry_in_ms": 4000,
            "backlog": 12, "lag_ms": 65_000, "delivered": 100, "last_delivery_ms": 1_790_000_000_000u64,
            "last_error": "connection refused", "failures": 3, "dropped": 0,
        }));
        assert_eq!(row[0], "clickhouse-sink");
        assert_eq!(row[1], "backing off (retry in 4.0s)");
        assert_eq!(row[2], "12");
        assert_eq!(row[3], "1m05s");
        assert_eq!(row[4], "100");
        assert!(row[5].starts_with("2026-"), "{}", row[5]);
        assert_eq!(row[6], "connection refused (3 failed attempts)");
    }

    #[test]
    fn a_sink_row_says_when_batches_are_smaller_for_memory() {
        let row = sink_row(&serde_json::json!({
            "name": "http-sink", "activity": "delivering", "batch_limit": 125, "backlog": 900,
        }));
        assert_eq!(row[1], "delivering, batches of 125 (memory)");
    }
}
