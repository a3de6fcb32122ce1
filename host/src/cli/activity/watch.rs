//! `mcpproxy activity watch`: follows the running server's feed of finished records
//! (Server-Sent Events), one line per record as it arrives, until Ctrl-C.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;

use crate::cli::Globals;
use crate::cli::output::{Format, Tone, paint, to_yaml};
use mcpproxy_support::quote;

use super::filter::FilterArgs;
use super::record::ShownRecord;
use super::render::{intent_label, status_label};
use super::store::{Source, Store, open};

#[derive(Debug, Args)]
pub(in crate::cli) struct WatchCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// `table`: one line per record; `jsonl` (or `json`): each record as one compact JSON
    /// line, as it arrives.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// Words instead of icons for the intent.
    #[arg(long)]
    no_icons: bool,
}

impl WatchCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let Store::Remote(remote) = open(&self.source, globals).await? else {
            bail!(
                "no mcpproxy is running on this config's listen address: `activity watch` follows a running server (`mcpproxy serve`); `activity list` reads the journal"
            );
        };
        let mut response = remote
            .get_stream("/activity/stream", &self.filters.query()?)
            .await?;
        eprintln!("following new activity; Ctrl-C to stop");
        let mut pending = String::new();
        let stdout = std::io::stdout();
        loop {
            let chunk = tokio::select! {
                chunk = response.chunk() => chunk.context("the server's activity feed stopped")?,
                _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
            };
            let Some(chunk) = chunk else {
                bail!("the server closed the activity feed (did it stop?)");
            };
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find("\n\n") {
                let event: String = pending.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect::<Vec<_>>()
                    .join("\n");
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                let Ok(record) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                let line = match self.output {
                    Format::Json | Format::Jsonl => record.to_string(),
                    Format::Yaml => format!("---\n{}", to_yaml(&record).trim_end()),
                    Format::Table => match ShownRecord::read(&record) {
                        Ok(shown) => watch_line(&shown, !self.no_icons),
                        Err(_) => continue,
                    },
                };
                let mut out = stdout.lock();
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    return Ok(ExitCode::SUCCESS); // `watch | head`
                }
            }
        }
    }
}

/// One record as one line of `activity watch`: time, server:tool, intent, status, duration,
/// and the verdict's reason when the policy did not simply allow; caller text escaped.
fn watch_line(shown: &ShownRecord, icons: bool) -> String {
    let record = &shown.record;
    let time: String = quote(&record.timestamp)
        .replace('T', " ")
        .chars()
        .take(23)
        .collect();
    let status = status_label(record);
    let mut line = format!(
        "{time}  {}:{}  {}  {}  {}ms",
        quote(&record.server_name),
        quote(&record.tool_name),
        intent_label(shown, icons),
        paint(&quote(&status), Tone::of_word(&status)),
        record.duration_ms
    );
    if let Some(message) = &record.verdict.message {
        line.push_str("  ");
        line.push_str(&quote(message));
    }
    line
}
