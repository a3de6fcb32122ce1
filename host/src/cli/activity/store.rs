//! Where the activity commands read records: the running server's REST API when one
//! answers on the config's listen address, else the journal file; with `--cluster` (`list`,
//! `show`, `stats`), the cluster's journal every replica delivers to.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Args;

use mcpproxy_activity::{Journal, JournalOptions};

use crate::cli::Globals;
use crate::cli::remote::{Reading, Remote};
use mcpproxy_cluster::journal::ClusterJournal;
use mcpproxy_config::{self as config, Config};
use mcpproxy_server::runtime::{journal_path, signing_key_seed};

#[derive(Debug, Args)]
pub(super) struct Source {
    /// The config file (to find the running server and the data dir).
    #[arg(long, env = "MCPPROXY_CONFIG", value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
}

/// Where records come from: the server, or the journal file.
pub(super) enum Store {
    Remote(Remote),
    Local(Arc<Journal>),
}

/// Where `list`, `show` and `stats` read: this proxy's records, or the cluster's.
pub(super) enum Trail {
    Store(Store),
    Cluster(Box<ClusterJournal>),
}

/// The cluster's journal when `cluster` (an error naming the fix when the config has none),
/// else [`open`].
pub(super) async fn open_trail(source: &Source, globals: &Globals, cluster: bool) -> Result<Trail> {
    if !cluster {
        return Ok(Trail::Store(open(source, globals).await?));
    }
    let loaded = config::load(source.config.as_deref(), globals.home.as_deref())?;
    Ok(Trail::Cluster(Box::new(ClusterJournal::from_config(
        &loaded.config,
    )?)))
}

pub(super) async fn open(source: &Source, globals: &Globals) -> Result<Store> {
    let loaded = match Reading::load(globals, source.config.as_deref()).await? {
        Reading::Config(loaded) => *loaded,
        Reading::Owner(remote) => return Ok(Store::Remote(remote)),
    };
    let config: Config = loaded.config;
    let data_dir = globals.data_dir(config.data_dir.as_deref());
    if let Some(remote) = Remote::find(&config, &data_dir).await? {
        return Ok(Store::Remote(remote));
    }
    let path = journal_path(&data_dir);
    if !path.exists() {
        bail!(
            "no activity yet: {} does not exist and no mcpproxy answers on {} (start one with `mcpproxy serve`)",
            path.display(),
            config.listen
        );
    }
    // The error says what is wrong (held by another process, damaged, unreadable) and what
    // to do; no context is added, so nothing is said twice.
    // The key the server signs with, so that `verify` checks against it and no key file is
    // made beside a journal whose key the config gives.
    let options = JournalOptions {
        chain: mcpproxy_activity::ChainOptions {
            key_seed: signing_key_seed(&config, &data_dir)?,
            ..Default::default()
        },
        replica: config.cluster.replica.clone(),
        ..JournalOptions::default()
    };
    let journal = Journal::open(&path, options)?;
    Ok(Store::Local(journal))
}
