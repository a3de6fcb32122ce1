//! `mcpproxy activity list`: the newest matching records, as a table or as JSON.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use serde_json::Value;

use crate::cli::Globals;
use crate::cli::output::{Fit, Format, Tone, local_time, print_data, print_table_fit};

use super::filter::FilterArgs;
use super::record::ShownRecord;
use super::render::{intent_label, reason, status_label};
use super::store::{Source, Store, Trail, open_trail};

#[derive(Debug, Args)]
pub(in crate::cli) struct ListCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// How many records.
    #[arg(short = 'n', long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1000))]
    limit: u64,
    /// Skip this many matching records.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
    /// Words instead of icons for the intent.
    #[arg(long)]
    no_icons: bool,
    /// Times in UTC instead of the local time zone.
    #[arg(long)]
    utc: bool,
    /// The whole cluster's records: read from the cluster journal (`cluster.journal`, the
    /// ClickHouse sink's table) instead of this proxy's journal.
    #[arg(long)]
    cluster: bool,
}

/// The page `GET /activity` answers, its records as they came (printed so for `-o json`).
#[derive(Deserialize)]
struct ServerPage {
    #[serde(default)]
    records: Vec<Value>,
}

impl ListCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let store = open_trail(&self.source, globals, self.cluster).await?;
        let records: Vec<ShownRecord> = match &store {
            Trail::Store(Store::Remote(remote)) => {
                let mut query = vec![
                    ("limit", self.limit.to_string()),
                    ("offset", self.offset.to_string()),
                ];
                query.extend(self.filters.query()?);
                let data = remote.get("/activity", &query).await?;
                let page: ServerPage = serde_json::from_value(data)
                    .context("the server's answer is not a page of activity records")?;
                if print_data(&page.records, self.output)? {
                    return Ok(ExitCode::SUCCESS);
                }
                page.records
                    .iter()
                    .map(ShownRecord::read)
                    .collect::<Result<_, _>>()
                    .context("the server's answer is not a page of activity records")?
            }
            Trail::Store(Store::Local(journal)) => {
                let filter = self.filters.filter()?;
                let page = journal.query(&filter, self.limit as usize, self.offset as usize)?;
                // As JSON values, whose keys print sorted, as a server's answer does.
                if print_data(&serde_json::to_value(&page.records)?, self.output)? {
                    return Ok(ExitCode::SUCCESS);
                }
                page.records.into_iter().map(ShownRecord::from).collect()
            }
            Trail::Cluster(cluster) => {
                let filter = self.filters.filter()?;
                let offset = usize::try_from(self.offset).unwrap_or(usize::MAX);
                let page = cluster.query(&filter, self.limit as usize, offset).await?;
                // As JSON values, whose keys print sorted, as a server's answer does.
                if print_data(&serde_json::to_value(&page.records)?, self.output)? {
                    return Ok(ExitCode::SUCCESS);
                }
                page.records.into_iter().map(ShownRecord::from).collect()
            }
        };
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|shown| {
                let r = &shown.record;
                vec![
                    r.id.clone(),
                    local_time(&r.timestamp, self.utc),
                    r.server_name.clone(),
                    r.tool_name.clone(),
                    intent_label(shown, !self.no_icons),
                    status_label(r),
                    format!("{}ms", r.duration_ms),
                    reason(r),
                ]
            })
            .collect();
        if rows.is_empty() {
            eprintln!("no matching activity");
        } else {
            print_table_fit(
                &[
                    "ID", "TIME", "SERVER", "TOOL", "INTENT", "STATUS", "DURATION", "REASON",
                ],
                &rows,
                |column, cell| (column == 5).then(|| Tone::of_word(cell)).flatten(),
                Fit {
                    readable: Some(7),
                    keep: &[0],
                    ends: &[1],
                },
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}
