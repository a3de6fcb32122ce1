//! `mcpproxy activity stats`: tool calls (or the records of `--type`) by server, tool,
//! variant, status and decision, with p50/p99 durations, one table per grouping.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::Value;

use crate::cli::Globals;
use crate::cli::output::{Format, print_data, print_table};
use mcpproxy_support::quote;

use super::filter::FilterArgs;
use super::store::{Source, Store, Trail, open_trail};

#[derive(Debug, Args)]
pub(in crate::cli) struct StatsCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// The whole cluster's calls: read from the cluster journal (`cluster.journal`, the
    /// ClickHouse sink's table) instead of this proxy's journal.
    #[arg(long)]
    cluster: bool,
}

impl StatsCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open_trail(&self.source, globals, self.cluster).await?;
        let stats: Value = match &store {
            Trail::Store(Store::Remote(remote)) => {
                remote
                    .get("/activity/stats", &self.filters.query()?)
                    .await?
            }
            Trail::Store(Store::Local(journal)) => {
                serde_json::to_value(journal.call_stats(&self.filters.filter()?)?)?
            }
            Trail::Cluster(cluster) => {
                serde_json::to_value(cluster.call_stats(&self.filters.filter()?).await?)?
            }
        };
        if !print_data(&stats, self.output)? {
            print_stats(&stats);
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The statistics as one table per grouping.
fn print_stats(stats: &Value) {
    let calls = stats["calls"].as_u64().unwrap_or(0);
    let what = match stats["type"].as_str() {
        None | Some("tool_call") => "calls".to_owned(),
        Some(other) => format!("{} records", quote(other)),
    };
    if calls == 0 {
        eprintln!("no matching {what}");
        return;
    }
    let dry_runs = match stats["dry_runs"].as_u64().unwrap_or(0) {
        0 => String::new(),
        n => format!(" ({n} of them dry runs)"),
    };
    println!(
        "{calls} {what}{dry_runs} from {} to {}; p50 {} ms, p99 {} ms",
        quote(stats["first"].as_str().unwrap_or("?")),
        quote(stats["last"].as_str().unwrap_or("?")),
        stats["p50_ms"],
        stats["p99_ms"]
    );
    for (title, key) in [
        ("SERVER", "by_server"),
        ("TOOL", "by_tool"),
        ("VARIANT", "by_variant"),
        ("STATUS", "by_status"),
        ("DECISION", "by_decision"),
    ] {
        let rows: Vec<Vec<String>> = stats[key]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .map(|g| {
                        vec![
                            quote(g["key"].as_str().unwrap_or("")),
                            g["calls"].to_string(),
                            format!("{} ms", g["p50_ms"]),
                            format!("{} ms", g["p99_ms"]),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        println!();
        print_table(&[title, "CALLS", "P50", "P99"], &rows);
    }
}
