//! `mcpproxy activity repair`: saves the readable records of a damaged journal into a new
//! journal file, keeping the damaged file aside (offline only: the server must be stopped).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use mcpproxy_activity::Journal;

use crate::cli::Globals;
use crate::cli::remote::Remote;
use mcpproxy_config as config;
use mcpproxy_server::runtime::journal_path;

use super::store::Source;

#[derive(Debug, Args)]
pub(in crate::cli) struct RepairCommand {
    #[command(flatten)]
    source: Source,
}

impl RepairCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        let loaded = config::load(self.source.config.as_deref(), globals.home.as_deref())?;
        let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
        if Remote::find(&loaded.config, &data_dir).await?.is_some() {
            bail!(
                "a server is running on {} with this journal; stop it (Ctrl-C or kill its process), \
                 then run `mcpproxy activity repair` again",
                loaded.config.listen
            );
        }
        let path = journal_path(&data_dir);
        if !path.exists() {
            bail!("nothing to repair: {} does not exist", path.display());
        }
        let report = tokio::task::spawn_blocking(move || Journal::repair(&path))
            .await
            .context("the repair task failed")??;
        println!(
            "saved {} records into a new journal; {} unreadable ranges skipped, {} unreadable records left out",
            report.saved, report.unreadable_ranges, report.unreadable_records
        );
        if report.sinks > 0 {
            println!(
                "{} sinks carried over; {} records queued for them again",
                report.sinks, report.requeued
            );
        }
        println!(
            "the damaged file is kept as {}",
            report.damaged_copy.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}
