//! `mcpproxy cluster status`: the replicas sharing this config's `cluster.postgres`, seen
//! from the database (no running replica needed): who beat recently, the schema version,
//! how much shared state there is.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use mcpproxy_auth::credentials::CredentialStore;
use mcpproxy_config as config;

use super::Globals;
use super::output::{Format, print_data};

#[derive(Debug, Subcommand)]
pub(super) enum ClusterCommand {
    /// The replicas seen recently, the schema version, the shared servers, pins, held
    /// tools and rate-limit buckets. Exits 1 when no replica is up.
    Status(StatusArgs),
}

#[derive(Debug, Args)]
pub(super) struct StatusArgs {
    /// The config file (for `cluster.postgres`).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Output: `table` (readable), `json` or `jsonl`.
    #[arg(short, long, value_enum, default_value_t)]
    output: Format,
}

impl ClusterCommand {
    pub(super) fn run(self, globals: &Globals) -> Result<ExitCode> {
        let Self::Status(args) = self;
        let loaded = config::load(args.config.as_deref(), globals.home.as_deref())?;
        if loaded.config.cluster.postgres.is_none() {
            bail!(
                "{} has no cluster.postgres: this mcpproxy shares no state with replicas (see \
                 docs/configuration.md, `cluster`)",
                loaded
                    .path
                    .as_deref()
                    .map_or_else(|| "the config".to_owned(), |p| p.display().to_string())
            );
        }
        let data_dir = globals.data_dir(loaded.config.data_dir.as_deref());
        let credentials = CredentialStore::open(&data_dir)?;
        let runtime = crate::cli::runtime::current_thread()?;
        let status = runtime.block_on(mcpproxy_cluster::status(
            &loaded.config.cluster,
            &credentials,
        ))?;
        let up = status.replicas.iter().filter(|r| r.up).count();
        if !print_data(&status, args.output)? {
            print_status(&status, up);
        }
        Ok(if up == 0 {
            ExitCode::from(super::EXIT_FAILURE)
        } else {
            ExitCode::SUCCESS
        })
    }
}

fn print_status(status: &mcpproxy_cluster::Status, up: usize) {
    println!("database: {}", status.database);
    println!(
        "schema: version {} (this mcpproxy: {})",
        status.schema_version, status.binary_schema_version
    );
    println!("replicas: {} seen, {up} up", status.replicas.len());
    for replica in &status.replicas {
        println!(
            "  {:<24} {:<5} mcpproxy {:<10} last seen {:.0} s ago, started {}",
            mcpproxy_support::quote(&replica.name),
            if replica.up { "up" } else { "down" },
            mcpproxy_support::quote(&replica.version),
            replica.seen_seconds_ago,
            replica.started_at
        );
    }
    println!(
        "servers: {} ({} approved)",
        status.servers, status.approved_servers
    );
    println!(
        "trust: {} pinned tools, {} held{}",
        status.pinned_tools,
        status.held_tools.len(),
        if status.held_tools.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                status
                    .held_tools
                    .iter()
                    .map(|t| mcpproxy_support::quote(t))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    println!("rate limits: {} shared buckets", status.buckets);
}
