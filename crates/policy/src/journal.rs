//! How the audit journal keeps and hands on its records: when a write counts as done
//! ([`Durability`]), how long records are kept ([`Retention`]) and how sinks are fed
//! ([`DeliveryOptions`]).
//!
//! These are settings as data, with their defaults: the config file names them
//! (`activity.durability`, `activity.retention`, `activity.delivery`) and the journal
//! (`mcpproxy-activity`) obeys them. They live here, below both, so that reading the config
//! needs no journal.

use std::time::Duration;

/// When a write counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `append` resolves after an fsync'd commit containing the record.
    Sync,
    /// `append` resolves once queued; data is fsync'd at least every `flush`.
    Async {
        /// Longest time a record stays unsynced (the loss window on a crash).
        flush: Duration,
    },
}

/// Retention limits; a zero value disables that limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Delete records older than this; default 90 days.
    pub max_age: Duration,
    /// Never delete a record younger than this because of `max_records`, `max_bytes` or
    /// `max_undelivered_bytes`; default 7 days.
    pub min_age: Duration,
    /// Keep at most this many records; default 1 000 000.
    pub max_records: u64,
    /// Keep the logical data size (record JSON + keys + index entries) under this; default
    /// 1 GiB. The file itself is larger (B-tree pages); it stops growing, and shrinks when
    /// the journal is next opened if retention freed much of it.
    pub max_bytes: u64,
    /// How large the logical data may grow while it holds records a sink has not delivered;
    /// past it, undelivered records are deleted too (and counted as dropped). Default 4 GiB.
    pub max_undelivered_bytes: u64,
    /// How often the journal's retention runs; default 60 s.
    pub interval: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(90 * 24 * 3600),
            min_age: Duration::from_secs(7 * 24 * 3600),
            max_records: 1_000_000,
            max_bytes: 1 << 30,
            max_undelivered_bytes: 4 << 30,
            interval: Duration::from_secs(60),
        }
    }
}

/// Batching and retry settings (config: `activity.delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryOptions {
    pub batch_records: usize,
    pub batch_bytes: usize,
    pub interval: Duration,
    pub max_backoff: Duration,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        Self {
            batch_records: 1000,
            batch_bytes: 4 << 20,
            interval: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}
