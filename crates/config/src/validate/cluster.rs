//! `cluster`: the shared-state URL, this replica's name and the cluster journal's sink.

use super::Context;
use crate::raw::RawCluster;
use crate::{ClusterConfig, Result};
use mcpproxy_support::quote;

/// The longest connection URL.
const MAX_URL_LEN: usize = 2048;

pub(super) fn cluster_from(
    raw: RawCluster,
    sinks: &[String],
    ctx: &Context<'_>,
) -> Result<ClusterConfig> {
    let postgres = match raw.postgres {
        Some(url) => {
            let lower = url.to_ascii_lowercase();
            let scheme_ok = lower.starts_with("postgres://") || lower.starts_with("postgresql://");
            let whole = url.starts_with("${") && url.ends_with('}') && !url.contains(' ');
            if !(scheme_ok || whole) || url.len() > MAX_URL_LEN || url.chars().any(char::is_control)
            {
                return Err(ctx.err(
                    "cluster.postgres",
                    "give a PostgreSQL connection URL, e.g. \
                     postgres://mcpproxy@db.internal:5432/mcpproxy (a password belongs in \
                     ${secret:NAME} or ${env:NAME}, not in this file), or remove the key to keep \
                     the state in this replica's data dir",
                ));
            }
            Some(url)
        }
        None => None,
    };
    let replica = match raw.replica {
        Some(name) => {
            let ok = !name.is_empty()
                && name.len() <= ClusterConfig::MAX_REPLICA_LEN
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !ok {
                return Err(ctx.err(
                    "cluster.replica",
                    format!(
                        "'{}' is not a replica name: use 1 to {} letters, digits, '-', '_' or \
                         '.', e.g. replica-1 (the load balancer keys sticky sessions on it)",
                        quote(&name),
                        ClusterConfig::MAX_REPLICA_LEN
                    ),
                ));
            }
            Some(name)
        }
        None => None,
    };
    let journal = match raw.journal {
        Some(name) => {
            if !sinks.contains(&name) {
                return Err(ctx.err(
                    "cluster.journal",
                    format!(
                        "'{}' is not one of plugins.sinks: name the sink plugin whose store the \
                         replicas share (e.g. clickhouse-sink) and list it in plugins.sinks too",
                        quote(&name)
                    ),
                ));
            }
            Some(name)
        }
        None => None,
    };
    Ok(ClusterConfig {
        postgres,
        replica,
        journal,
    })
}
