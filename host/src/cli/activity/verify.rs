//! `mcpproxy activity verify`: walks the journal's hash chain and signed checkpoints (from
//! the running server, else the journal file, or an export with `--file`) and names every
//! break; exits 0 only when the whole chain holds, 1 when it does not. `mcpproxy activity
//! key` prints the public key the checkpoints are signed with.

use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;

use mcpproxy_activity::{
    ChainReport, KEY_FILE, SigningKey, public_key_of, read_witness, verify_export_with,
};

use crate::cli::Globals;
use crate::cli::output::{Format, print_data};
use mcpproxy_cluster::journal::{ClusterJournal, ClusterKeys, ClusterReport};
use mcpproxy_config as config;

use super::store::{Source, Store, open};

#[derive(Debug, Args)]
pub(in crate::cli) struct VerifyCommand {
    #[command(flatten)]
    source: Source,
    /// Check only the chain from the first record at or after this time: a duration ago
    /// (`30m`, `7d`) or an RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// The public key (64 hex digits, as `mcpproxy activity key` prints it) the checkpoints
    /// must be signed with; default the journal's own key (with --file: the key the
    /// export's checkpoints name, which proves only that the export is consistent). With
    /// --cluster, `REPLICA=PUBKEY` gives one replica's key (repeat for each), and a bare
    /// PUBKEY the key of every other replica.
    #[arg(long, value_name = "PUBKEY")]
    key: Vec<String>,
    /// Walk every replica's chain in the cluster journal (`cluster.journal`, the ClickHouse
    /// sink's table) instead of this proxy's journal. The table holds no signatures: give
    /// the replicas' checkpoints with --witness (each names its replica) and their keys with
    /// --key to prove more than consistency.
    #[arg(long, conflicts_with = "file")]
    cluster: bool,
    /// Verify this export (`mcpproxy activity export --proof > FILE`) instead of the
    /// journal, offline.
    #[arg(long, value_name = "EXPORT.jsonl")]
    file: Option<PathBuf>,
    /// Also check the chain against the checkpoints a witness kept (JSON Lines, each the
    /// `data` of `GET /api/v1/activity/checkpoint`): a chain rewritten and signed again
    /// with the journal's own key no longer matches them.
    #[arg(long, value_name = "CHECKPOINTS.jsonl")]
    witness: Option<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl VerifyCommand {
    pub(super) async fn run(mut self, globals: &Globals) -> Result<ExitCode> {
        let keys = parse_keys(&self.key, self.cluster)?;
        self.key.clear();
        let key = keys.all.clone();
        let since = self
            .since
            .as_deref()
            .map(super::filter::parse_time_arg)
            .transpose()
            .map_err(|e| anyhow::anyhow!("--since {e}"))?;
        let witness = match &self.witness {
            Some(path) => {
                let input = std::fs::File::open(path)
                    .with_context(|| format!("cannot open the witness file {}", path.display()))?;
                read_witness(BufReader::new(input))
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            }
            None => Vec::new(),
        };
        if self.cluster {
            let loaded = config::load(self.source.config.as_deref(), globals.home.as_deref())?;
            let cluster = ClusterJournal::from_config(&loaded.config)?;
            let report = cluster.verify_chains(&keys, since, witness).await?;
            if !print_data(&serde_json::to_value(&report)?, self.output)? {
                print_cluster_report(&report, cluster.shown_url());
            }
            return Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            });
        }
        let report: Value = if let Some(file) = &self.file {
            let input = std::fs::File::open(file)
                .with_context(|| format!("cannot open the export {}", file.display()))?;
            let report = verify_export_with(BufReader::new(input), key.as_deref(), since, witness)
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            serde_json::to_value(report)?
        } else {
            match open(&self.source, globals).await? {
                Store::Remote(remote) if !witness.is_empty() => {
                    // The server cannot be handed the witness: its export is checked here.
                    let query = [("proof", "true".to_owned())];
                    let mut response = remote.get_stream("/activity/export", &query).await?;
                    let mut export = Vec::new();
                    while let Some(chunk) = response
                        .chunk()
                        .await
                        .context("the export from the server stopped before its end")?
                    {
                        export.extend_from_slice(&chunk);
                    }
                    let key = match &key {
                        Some(key) => key.clone(),
                        None => local_key(&self.source, globals)?,
                    };
                    let report = verify_export_with(export.as_slice(), Some(&key), since, witness)
                        .map_err(|e| anyhow::anyhow!("the server's export: {e}"))?;
                    serde_json::to_value(report)?
                }
                Store::Remote(remote) => {
                    let mut query = Vec::new();
                    if let Some(since) = since {
                        query.push(("since", mcpproxy_activity::format_timestamp(since)));
                    }
                    if let Some(key) = &key {
                        query.push(("key", key.clone()));
                    }
                    remote.get("/activity/verify", &query).await?
                }
                Store::Local(journal) => {
                    let report = tokio::task::spawn_blocking(move || {
                        journal.verify_chain_with(key.as_deref(), since, witness)
                    })
                    .await
                    .context("the verify task failed")??;
                    serde_json::to_value(report)?
                }
            }
        };
        let parsed: ChainReport = serde_json::from_value(report.clone())
            .context("the server's verify report is not one this mcpproxy reads")?;
        if !print_data(&report, self.output)? {
            print_report(&parsed);
        }
        Ok(if parsed.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// `--key` values: one bare key (every replica), and with `cluster`, `REPLICA=KEY` pairs.
fn parse_keys(given: &[String], cluster: bool) -> Result<ClusterKeys> {
    let mut keys = ClusterKeys::default();
    for value in given {
        let (replica, key) = match value.split_once('=') {
            Some((replica, key)) if cluster => (Some(replica.trim()), key.trim()),
            Some(_) => bail!(
                "--key '{value}' names a replica: only --cluster walks several replicas' \
                 chains; give the 64 hex digits `mcpproxy activity key` prints"
            ),
            None => (None, value.trim()),
        };
        if key.len() != 64 || !key.chars().all(|c| c.is_ascii_hexdigit()) {
            bail!(
                "--key '{value}' is not a public key: give the 64 hex digits `mcpproxy activity \
                 key` prints{}",
                if cluster { " (or REPLICA=KEY)" } else { "" }
            );
        }
        let key = key.to_ascii_lowercase();
        let slot = match replica {
            Some(replica) => keys.by_replica.insert(replica.to_owned(), key),
            None => keys.all.replace(key),
        };
        if slot.is_some() {
            bail!(
                "--key is given twice for {}",
                replica.unwrap_or("every replica")
            );
        }
    }
    Ok(keys)
}

/// The cluster report for a person: each replica's chain, then what fit no chain.
fn print_cluster_report(report: &ClusterReport, url: &str) {
    println!(
        "{} distinct rows in the cluster journal at {url}, {}",
        report.rows,
        counted(report.replicas.len() as u64, "replica chain")
    );
    for chain in &report.replicas {
        let name = if chain.replica.is_empty() {
            "(records that name no replica)".to_owned()
        } else {
            format!("replica {}", chain.replica)
        };
        println!("\n{name}:");
        print_report(&chain.report);
    }
    for problem in &report.problems {
        println!("\n{problem}");
    }
    println!(
        "\n{}",
        if report.ok {
            "OK: every replica's chain holds"
        } else {
            "BROKEN: see above"
        }
    );
}

/// The report for a person: what was checked, then each break.
fn print_report(report: &ChainReport) {
    let range = match (report.first_seq, report.last_seq) {
        (Some(first), Some(last)) => format!("seq {first} to {last}"),
        _ => "no chained record".to_owned(),
    };
    println!(
        "{} records: {} chained ({range}), {} unchained (written before the chain), {} pending",
        report.records, report.chained, report.unchained, report.pending
    );
    if report.pruned > 0 || report.replaced > 0 {
        println!(
            "{} pruned by retention before its anchor checkpoint, {} replaced by a later version",
            report.pruned, report.replaced
        );
    }
    match &report.last_checkpoint {
        Some(last) => println!(
            "{}, the last of seq {} signed at {}; {} after it not signed yet",
            counted(report.checkpoints, "checkpoint"),
            last.seq,
            last.time,
            counted(report.unsigned_tail, "record")
        ),
        None => println!("no valid checkpoint: nothing is signed, only the links were checked"),
    }
    if let (Some(key), Some(source)) = (&report.key, &report.key_source) {
        let from = match source.as_str() {
            "given" => "given with --key",
            "journal" => "the journal's own key",
            _ => "named by the checkpoints themselves: pass --key to check against a key you trust",
        };
        println!("signatures checked against {key} ({from})");
    }
    if report.ok {
        println!("OK: the chain holds");
        return;
    }
    println!(
        "BROKEN: {}",
        counted(report.problems.len() as u64, "problem")
    );
    for problem in &report.problems {
        let kind = serde_json::to_value(problem.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        println!("  {kind}: {}", problem.message);
    }
}

/// `1 checkpoint`, `3 checkpoints`.
fn counted(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[derive(Debug, Args)]
pub(in crate::cli) struct KeyCommand {
    #[command(flatten)]
    source: Source,
}

impl KeyCommand {
    pub(super) async fn run(self, globals: &Globals) -> Result<ExitCode> {
        println!("{}", local_key(&self.source, globals)?);
        Ok(ExitCode::SUCCESS)
    }
}

/// The public key of the journal in the config's data dir: the one the config names
/// (`activity.checkpoints.signing_key`), else the key file's.
fn local_key(source: &Source, globals: &Globals) -> Result<String> {
    let loaded = config::load(source.config.as_deref(), globals.home.as_deref())?;
    let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
    if let Some(seed) = mcpproxy_server::runtime::signing_key_seed(&loaded.config, &data_dir)? {
        return Ok(SigningKey::from_hex_seed(&seed.hex, &seed.source)?.public_hex());
    }
    Ok(public_key_of(&data_dir.join(KEY_FILE))?)
}
