//! How a journal is opened: [`JournalOptions`], the [`Durability`] of its writes, the
//! observers told of commits and fsyncs, and the default page cache.

use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::DEFAULT_LOG_CAPACITY;
use super::storage::WriteFaults;
use super::writer;
use crate::{Durability, Retention};

/// The redb page cache a journal gets by default: 8 MiB.
///
/// The cache fills as the file grows and then stays full, so its size is memory the proxy
/// keeps for good: with redb's own default (1 GiB) RSS heads to ~1 GB, and with 64 MiB (the
/// previous default) the proxy's RSS rose by ~60 MiB over its first 100,000 calls. The
/// journal is written at its end and read mostly there (the newest records, the outbox), and
/// the file's pages stay in the kernel's page cache, so a page that misses this cache costs
/// a `pread`, not a disk read.
pub(crate) const DEFAULT_CACHE_BYTES: usize = 8 << 20;

/// How to open a [`Journal`](super::Journal).
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Commit durability; default [`Durability::Sync`].
    pub durability: Durability,
    /// redb page cache; default [`DEFAULT_CACHE_BYTES`].
    pub cache_bytes: usize,
    /// Limits applied by [`Journal::run_retention`](super::Journal::run_retention).
    pub retention: Retention,
    /// Records deleted per retention transaction; default 10 000.
    pub retention_batch: usize,
    /// Told how long each group commit took (for metrics); default none.
    pub on_commit: Option<CommitObserver>,
    /// Told of each fsync the writer makes (for metrics); default none.
    pub on_fsync: Option<FsyncObserver>,
    /// In [`Durability::Sync`], how long records nobody waits for wait for one somebody
    /// does, to share its commit; default [`SYNC_CARRY`](writer::SYNC_CARRY) (2 ms).
    pub sync_carry: Duration,
    /// Size of sync mode's write-ahead log file (preallocated); default
    /// [`DEFAULT_LOG_CAPACITY`] (8 MiB). 0: no log, every sync-mode commit is `Immediate`.
    pub log_capacity: u64,
    /// In sync mode, how long the writer waits without writes before it checkpoints the
    /// log into the redb file; default 1 s.
    pub checkpoint_idle: Duration,
    /// Fault injection for tests: while on, every write of the journal's files fails as on
    /// a full disk (see [`WriteFaults`]); default none.
    pub write_faults: Option<WriteFaults>,
    /// The replica of a cluster this journal belongs to: written into every record the
    /// producers put (append, upsert, submit) that names none; default none.
    pub replica: Option<String>,
    /// The hash chain's checkpoints: how often, and the signing key's file.
    pub chain: crate::chain::ChainOptions,
    /// Test hook: while set, the write-ahead log's fsyncs fail.
    #[cfg(test)]
    pub(crate) failing_log: Option<Arc<AtomicBool>>,
}

/// A callback told the duration of each group commit.
#[derive(Clone)]
pub struct CommitObserver(pub Arc<dyn Fn(Duration) + Send + Sync>);

/// A callback told of each fsync the journal's writer makes: a write-ahead log fsync, a
/// full (`Immediate`) commit, the log's start-over.
#[derive(Clone)]
pub struct FsyncObserver(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for FsyncObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FsyncObserver")
    }
}

impl std::fmt::Debug for CommitObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitObserver")
    }
}

impl Default for JournalOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Sync,
            cache_bytes: DEFAULT_CACHE_BYTES,
            retention: Retention::default(),
            retention_batch: 10_000,
            on_commit: None,
            on_fsync: None,
            sync_carry: writer::SYNC_CARRY,
            log_capacity: DEFAULT_LOG_CAPACITY,
            checkpoint_idle: writer::CHECKPOINT_IDLE,
            write_faults: None,
            replica: None,
            chain: crate::chain::ChainOptions::default(),
            #[cfg(test)]
            failing_log: None,
        }
    }
}
