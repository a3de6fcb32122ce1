//! The `activity` subcommands and their dispatch: each runs on a current-thread runtime.
//!
//! The library turns a panic of redb on a damaged page into an error; these commands also
//! keep the panic's own report off the terminal (a panic hook that stays silent for panics
//! raised inside redb, set only for the `activity` commands), so the user sees one message
//! saying what to do.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::cli::Globals;

use super::checkpoint::CheckpointCommand;
use super::export::ExportCommand;
use super::list::ListCommand;
use super::repair::RepairCommand;
use super::show::ShowCommand;
use super::sinks::SinksCommand;
use super::stats::StatsCommand;
use super::verify::{KeyCommand, VerifyCommand};
use super::watch::WatchCommand;

#[derive(Debug, Subcommand)]
pub(in crate::cli) enum ActivityCommand {
    /// List activity records, newest first.
    List(ListCommand),
    /// Show every field of one record.
    Show(ShowCommand),
    /// Show each sink's delivery: backlog, lag, last delivery and last error.
    Sinks(SinksCommand),
    /// Write every matching record, oldest first, as JSON Lines or CSV (streamed: memory
    /// stays flat however many records match).
    Export(ExportCommand),
    /// Tool calls (or the records of `--type`) by server, tool, variant, status and
    /// decision, with p50/p99 durations.
    Stats(StatsCommand),
    /// Follow new records as calls finish (from the running server), until Ctrl-C.
    Watch(WatchCommand),
    /// Save the readable records of a damaged journal into a new journal file (the damaged
    /// file is kept aside as activity.redb.damaged-<time>). Stop the server first.
    Repair(RepairCommand),
    /// Walk the journal's hash chain and signed checkpoints (or an export's, with --file)
    /// and name every record deleted, altered, inserted or reordered; exit 0 only when the
    /// whole chain holds.
    Verify(VerifyCommand),
    /// Print the public key the journal signs its checkpoints with (give it to whoever
    /// verifies an export, or keep it with a witness).
    Key(KeyCommand),
    /// Sign the chain's head now and print the last checkpoint (one JSON line); with
    /// --push, POST it to a witness.
    Checkpoint(CheckpointCommand),
}

impl ActivityCommand {
    pub(in crate::cli) fn run(self, globals: &Globals) -> Result<ExitCode> {
        quiet_redb_panics();
        let runtime = crate::cli::runtime::current_thread()?;
        runtime.block_on(async {
            match self {
                Self::List(cmd) => cmd.run(globals).await,
                Self::Show(cmd) => cmd.run(globals).await,
                Self::Sinks(cmd) => cmd.run(globals).await,
                Self::Repair(cmd) => cmd.run(globals).await,
                Self::Export(cmd) => cmd.run(globals).await,
                Self::Stats(cmd) => cmd.run(globals).await,
                Self::Watch(cmd) => cmd.run(globals).await,
                Self::Verify(cmd) => cmd.run(globals).await,
                Self::Key(cmd) => cmd.run(globals).await,
                Self::Checkpoint(cmd) => cmd.run(globals).await,
            }
        })
    }
}

/// Keeps the report of a panic raised inside redb (a damaged page, which the journal turns
/// into an error) off stderr; any other panic is reported as before.
fn quiet_redb_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_redb = info.location().is_some_and(|l| {
            let file = l.file().replace('\\', "/");
            file.contains("/redb-") || file.contains("/redb/")
        });
        if !in_redb {
            previous(info);
        }
    }));
}
