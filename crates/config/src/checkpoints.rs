//! `activity.checkpoints`: when the journal's hash chain has its head signed (a checkpoint):
//! after so many records, and when the head has been unsigned for so long; and, optionally,
//! the key it is signed with, as a `${secret:NAME}` (or `${env:NAME}`) reference, so that
//! the replicas of a cluster can share one key and it need not live in the data dir. The
//! journal obeys them; they live here as plain values so that reading the config needs no
//! journal.

use std::time::Duration;

/// When a checkpoint is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoints {
    /// Sign the head after this many records; 0: never by count (only by time).
    pub every_records: u64,
    /// Sign the head once it has been unsigned this long.
    pub every: Duration,
    /// The signing key: one reference, `${secret:NAME}` or `${env:NAME}`, whose value is the
    /// Ed25519 seed as 64 hex digits, resolved at start. `None`: the key file in the data
    /// dir (`activity-signing.key`, made at first start).
    pub signing_key: Option<String>,
}

/// The most records between two checkpoints `every_records` accepts.
pub const MAX_CHECKPOINT_RECORDS: u64 = 1_000_000;
/// The longest `every_secs` accepted: a day.
pub const MAX_CHECKPOINT_SECS: u64 = 86_400;

impl Default for Checkpoints {
    /// Every 1,000 records or 60 s: one Ed25519 signature, on the journal's writer thread,
    /// that often.
    fn default() -> Self {
        Self {
            every_records: 1000,
            every: Duration::from_secs(60),
            signing_key: None,
        }
    }
}
