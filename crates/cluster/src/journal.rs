//! The cluster's journal, read back: when `cluster.journal` names the ClickHouse sink, the
//! records every replica delivered to that sink's table are queried over ClickHouse's HTTP
//! interface and answered as the local journal answers (the same [`Filter`], pages and
//! statistics), each record read from the table's `record` column and counted once however
//! often it was delivered.
//!
//! - [`target`]: where the table is (the sink's own settings: url, database, table,
//!   credentials), from the config;
//! - [`sql`]: the statements, every value a checked ClickHouse string literal or number;
//! - [`client`]: one statement over HTTP, bounded, ClickHouse's errors made clear;
//! - [`reader`]: pages, single records and statistics ([`ClusterJournal`]);
//! - [`verify`]: every replica's hash chain walked ([`ClusterJournal::verify_chains`]);
//! - [`error`]: what can go wrong, each saying what to check.
//!
//! [`Filter`]: mcpproxy_activity::Filter

mod client;
mod error;
mod reader;
mod sql;
mod target;
mod verify;

pub use error::Error;
pub use reader::ClusterJournal;
pub use verify::{ClusterKeys, ClusterReport, ReplicaChain};
