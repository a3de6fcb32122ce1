//! The servers of a cluster (`cluster.postgres`): a change made through this replica goes
//! to the cluster's table (`cluster::Cluster::change_server`) instead of the file, and a
//! change any replica made is applied here as a hand edit of the file is
//! ([`follow_cluster`]). The file's own `mcpServers` are ignored, with a warning.

use std::path::Path;
use std::sync::Arc;

use mcpproxy_cluster::{ChangeError, Cluster, config_with_servers};
use mcpproxy_config::document::Document;
use mcpproxy_config::{self as config, Config, ServerConfig};

use super::{Actor, Change, Error, Manager, describe, for_an_agent};

impl Manager {
    /// Makes `change` to the cluster's servers; returns the config as changed.
    pub(super) async fn change_shared(
        &self,
        cluster: &Cluster,
        change: Change,
        actor: Actor,
    ) -> Result<Config, Error> {
        let change = match actor {
            Actor::Agent => for_an_agent(change)?,
            Actor::Person => change,
        };
        let name = change.name().to_owned();
        cluster
            .change_server(
                self.path(),
                self.home.as_deref(),
                &name,
                |document| match change {
                    Change::Add { name, entry } => document.add_server(&name, &entry),
                    Change::Remove { name } => document.remove_server(&name),
                    Change::Patch { name, patch } => document.patch_server(&name, &patch),
                },
            )
            .await
            .map_err(|e| match e {
                ChangeError::Edit(e) => Error::Edit(e),
                ChangeError::Invalid(e) => Error::Invalid(e),
                ChangeError::Read(source) => Error::Read {
                    path: self.path.clone().unwrap_or_default(),
                    source,
                },
                ChangeError::ReadOnly => Error::ReadOnly {
                    path: self.path.clone(),
                },
                ChangeError::Shared(e) => Error::Shared(e.to_string()),
            })
    }

    /// This replica's file with the cluster's servers as they are now; with `warn`, says so
    /// when the file's own `mcpServers` differ (a hand edit of them changes nothing).
    pub(super) async fn shared_config(
        &self,
        cluster: &Cluster,
        warn: bool,
    ) -> Result<Config, Error> {
        let servers = cluster
            .servers()
            .await
            .map_err(|e| Error::Shared(e.to_string()))?;
        let (config, differs) = config_with_servers(self.path(), self.home.as_deref(), &servers)
            .map_err(|source| Error::Read {
                path: self.path.clone().unwrap_or_default(),
                source,
            })?;
        if warn && differs {
            tracing::warn!(
                "the edit of mcpServers in {} is ignored: the replicas of the cluster run the cluster's servers; change them with `mcpproxy upstream add|remove|enable|disable` or the REST API of any replica",
                self.path
                    .as_deref()
                    .map_or_else(|| "the config file".to_owned(), |p| p.display().to_string())
            );
        }
        Ok(config)
    }
}

/// The servers a replica starts with: the cluster's, seeded from `path`'s `mcpServers` by
/// the first replica that ever joins. Warns when the file's differ (they are ignored).
pub async fn cluster_servers(
    cluster: &Cluster,
    path: Option<&Path>,
    home: Option<&Path>,
) -> Result<Vec<ServerConfig>, Error> {
    let read = |source| Error::Read {
        path: path.map(Path::to_owned).unwrap_or_default(),
        source,
    };
    let text = match path {
        Some(path) if path.exists() => config::read_bounded(path).map_err(read)?,
        _ => String::new(),
    };
    let seed = Document::parse(&text)
        .map(|d| d.servers())
        .unwrap_or_default();
    let servers = cluster
        .servers_at_start(&seed)
        .await
        .map_err(|e| Error::Shared(e.to_string()))?;
    let (config, differs) = config_with_servers(path, home, &servers).map_err(read)?;
    if differs {
        tracing::warn!(
            "the mcpServers of {} are ignored: the replicas of the cluster run the cluster's servers ({}); change them with `mcpproxy upstream add|remove|enable|disable` or the REST API of any replica",
            path.map_or_else(|| "the config file".to_owned(), |p| p.display().to_string()),
            config
                .servers
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(config.servers)
}

/// Applies each change another replica makes to the cluster's servers, until `shutdown`.
pub fn follow_cluster(
    manager: Arc<Manager>,
    cluster: Arc<Cluster>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                () = cluster.servers_changed() => {}
            }
            match manager.reload_shared().await {
                Ok(applied) if applied.is_empty() => {}
                Ok(applied) => tracing::info!(
                    "applied the cluster's servers as changed through another replica: {}",
                    describe(&applied)
                ),
                Err(e) => tracing::error!(
                    "cannot apply the cluster's servers: {e}; the servers keep running as they were"
                ),
            }
        }
    });
}
