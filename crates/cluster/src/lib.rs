//! Replicas that share one state (`cluster.postgres`): the approvals, pins and held tools of
//! the trust store, the upstream servers and the calls that wait for a person live in
//! PostgreSQL, and each change reaches every replica at once through `LISTEN`/`NOTIFY`.
//!
//! - `connect`: the URL (references resolved), connections, messages that name the database
//!   by host and port, never by its password;
//! - `migrate`: the schema, embedded and applied at start under an advisory lock;
//! - `trust_sync`: the trust decisions read in one snapshot and written one transaction per
//!   change;
//! - `servers`: the cluster's upstream servers (`mcpServers`), seeded once from the first
//!   replica's file, changed through any replica;
//! - `bucket`: token buckets shared by the replicas ([`Cluster::take`]), for rate limits
//!   that hold across the cluster;
//! - `status`: each replica's heartbeat, and what `mcpproxy cluster status` shows;
//! - `replica`: [`Cluster`], this replica's link: joining, its writer, its listener and its
//!   heartbeat;
//! - `approvals`: the calls that wait for a person, listed and answered through any
//!   replica ([`Cluster::answer_approval`]);
//! - `journal`: the cluster's journal read back from the ClickHouse sink's table (what
//!   `activity --cluster` and the REST API's `cluster=true` answer from).

mod approvals;
mod bucket;
mod connect;
mod error;
pub mod journal;
mod migrate;
mod replica;
mod servers;
mod status;
mod trust_sync;

#[cfg(test)]
mod tests;

pub use approvals::SharedAnswer;
pub use bucket::SharedBuckets;
pub use error::Error;
pub use replica::Cluster;
pub use servers::{ChangeError, config_with_servers};
pub use status::{Status, status};
