//! `mcpproxy activity export`: every matching record, oldest first, as JSON Lines or CSV,
//! streamed from the server or the journal (memory stays flat however many match). In JSON
//! Lines a record in the hash chain carries its chain fields, and `--proof` appends the
//! signed checkpoints, so the export verifies offline.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use mcpproxy_activity::ExportFormat;

use crate::cli::Globals;

use super::filter::FilterArgs;
use super::store::{Source, Store, open};

#[derive(Debug, Args)]
pub(in crate::cli) struct ExportCommand {
    #[command(flatten)]
    source: Source,
    #[command(flatten)]
    filters: FilterArgs,
    /// `jsonl`: every field, one record per line; `csv`: one row per record with the
    /// columns a spreadsheet wants.
    #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "csv"])]
    format: String,
    /// After the records, the hash chain's signed checkpoints and state (JSON Lines only),
    /// so that `mcpproxy activity verify --file` checks the export offline.
    #[arg(long)]
    proof: bool,
}

impl ExportCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let format: ExportFormat = self
            .format
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?;
        let store = open(&self.source, globals).await?;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
        let written = match &store {
            Store::Remote(remote) => {
                let mut query = self.filters.query()?;
                query.push(("format", self.format.clone()));
                if self.proof {
                    query.push(("proof", "true".to_owned()));
                }
                let mut response = remote.get_stream("/activity/export", &query).await?;
                let mut written = Ok(());
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .context("the export from the server stopped before its end")?
                {
                    written = out.write_all(&chunk);
                    if written.is_err() {
                        break;
                    }
                }
                written
            }
            Store::Local(journal) => {
                let filter = self.filters.filter()?;
                let mut written = out.write_all(format.header().as_bytes());
                let mut buf = Vec::new();
                if written.is_ok() {
                    journal.for_each_export_chunk(&filter, None, |chunk| {
                        buf.clear();
                        for (record, row) in chunk {
                            format.write_row(record, row.as_deref(), &mut buf);
                        }
                        written = out.write_all(&buf);
                        written.is_ok()
                    })?;
                }
                if written.is_ok() && self.proof && format == ExportFormat::Jsonl {
                    written = out.write_all(&journal.chain_trailer()?);
                }
                written
            }
        };
        match written.and_then(|()| out.flush()) {
            Ok(()) => Ok(ExitCode::SUCCESS),
            // `export | head`: the reader has what it wanted.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
            Err(e) => Err(e).context("cannot write the export"),
        }
    }
}
