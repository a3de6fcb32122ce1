//! The journal: a redb file written by one writer thread with group commit.
//!
//! Producers queue their record on a channel. A producer that waits for the commit (`append`
//! and `upsert` in sync mode) serializes the record first; otherwise (`submit`, and every
//! write in async mode) the writer thread does, so a call's thread does not spend its time
//! on records nobody waits for. The writer thread takes everything queued (up to
//! [`MAX_BATCH`]) into one write transaction and commits it:
//!
//! - [`Durability::Sync`]: `append` resolves once its record is durable, so an acknowledged
//!   record survives `kill -9` and power loss. Each batch is committed to redb without an
//!   fsync and appended to the write-ahead log (`activity.redb-wal`, see `wal`), which is
//!   fsync'd: one or two pages instead of the ~20 of an `Immediate` commit. A *checkpoint*
//!   (an `Immediate` commit, then the log starts over) runs when the log is full, after
//!   [`JournalOptions::checkpoint_idle`] without writes, before each retention pass and on
//!   close; [`Journal::open`] replays what a crash left in the log. With
//!   [`JournalOptions::log_capacity`] 0 every commit is `Immediate` instead.
//!   Records nobody waits for ([`Journal::submit`]: a call's outcome) wait up to
//!   [`JournalOptions::sync_carry`] (2 ms) for one somebody does, to share its commit (one fsync per call
//!   instead of two under steady calls).
//! - [`Durability::Async`]: `append` resolves once queued (at most [`MAX_QUEUED`] wait;
//!   past that `append` waits for the writer); the writer lets a batch fill for
//!   `ASYNC_LINGER` (2 ms) after its first record, commits with redb's `Durability::None` and
//!   makes an `Immediate` commit at least every `flush` while anything is unsynced (and on
//!   [`Journal::flush`] and drop). A crash loses at most the last `flush` of records.
//!
//! A put replaces any row with the same id and moves its index entries (pending → success).
//! Several puts of one record in one batch (a call's `pending` record and its outcome) are
//! written once, as the last of them.
//! If a batch fails, each record is retried in its own transaction so one bad record does not
//! fail its neighbours. Reads (`get`, `query`, `stats`) run on the caller's thread in redb read
//! transactions; a page of 50 takes ~0.2 ms, so calling them inline from async code is fine.
//!
//! Damage: redb may panic (`unreachable!`) or report corruption when it reads a damaged
//! page. Every read and write runs under [`guard`], which turns either into
//! [`Error::Damaged`] (a message pointing at `mcpproxy activity repair`); no panic hook is
//! installed. A write that hits damage fails (the proxy refuses the call: fail closed) and
//! the writer stops touching the file, answering every later write with the same error, so
//! it never waits on a transaction a panic left behind.
//!
//! A full disk or an I/O error: the journal fails closed and heals by itself. The writer
//! enters the failing state ([`Journal::health`] says why); records somebody waits for (a
//! call's `pending` record) are refused with [`Error::Unwritable`], so the call is not run,
//! while records nobody waits for are kept in memory; the writer retries with backoff,
//! re-opening redb (which refuses everything after an I/O error until re-opened) once a
//! probe write works, and writes back what the write-ahead log and memory hold (see the
//! writer's `recovery`). Readers take the database per transaction from a `DbSlot` the
//! writer can swap.
//!
//! Compaction: redb files never shrink on their own. [`Journal::open`] compacts the file
//! when much of it is free space (see [`compact_if_worthwhile`]); a running server's file
//! therefore follows retention down at its next start (or `mcpproxy activity repair`).
//!
//! This file holds the public API ([`Journal`], [`JournalOptions`], [`Durability`],
//! [`JournalStats`]); the parts live in:
//!
//! - `schema`: the tables, index keys, row cost and storage-key helpers;
//! - `writer`: the writer thread (group commit, syncs, checkpoints, replay, and in
//!   `writer::recovery` the failing state and the way back) and the transaction helpers;
//! - `wal`: the write-ahead log file of sync mode;
//! - `health`: `ok` or `failing` with the reason;
//! - `storage`: the write-fault seam for tests ([`WriteFaults`]), the redb backend that
//!   honours it, the recovery's probe write, I/O error texts;
//! - `tests`, `log_tests`, `crash_tests` and `failure_tests`: the unit tests, those of the
//!   write-ahead log's use, the `kill -9` crash tests, and a failing disk's.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::outbox;
use super::record::{ActivityRecord, Status, format_timestamp};
use super::retention::Retention;
use super::{Error, Result};

mod health;
mod schema;
mod storage;
mod wal;
mod writer;

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod tests;

use health::Health;
pub use health::JournalHealth;
pub(super) use schema::{
    DATA_BYTES, IDX_INTENT, IDX_SERVER, IDX_STATUS, IDX_TOOL, IDX_TYPE, INDEXES, META, RECORDS,
    index_keys, key_id, key_ms, open_indexes, parse_key, row_cost,
};
pub use storage::WriteFaults;
pub use wal::DEFAULT_CAPACITY as DEFAULT_LOG_CAPACITY;
use wal::WriteAheadLog;
use writer::{Applied, Command, Put, Unencoded, WriterSetup, commit_puts, writer_loop};

/// A test hook for the binary: while the file this variable names exists, every write of
/// the journal fails as on a full disk (see [`WriteFaults`]). Never set in normal use.
pub(crate) const WRITE_FAULT_ENV: &str = "MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE";

/// Most records committed in one transaction.
pub(crate) const MAX_BATCH: usize = 10_000;

/// Most records `append`/`upsert` let wait in the queue: past this they wait for the writer
/// (without it, Async mode under a flood queues without bound: ~1 GB in the bench).
pub(crate) const MAX_QUEUED: usize = 2 * MAX_BATCH;

/// Longest a read waits for the writer to apply the records sent before it.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

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

/// The redb page cache a journal gets by default: 8 MiB.
///
/// The cache fills as the file grows and then stays full, so its size is memory the proxy
/// keeps for good: with redb's own default (1 GiB) RSS heads to ~1 GB, and with 64 MiB (the
/// previous default) the proxy's RSS rose by ~60 MiB over its first 100,000 calls. The
/// journal is written at its end and read mostly there (the newest records, the outbox), and
/// the file's pages stay in the kernel's page cache, so a page that misses this cache costs
/// a `pread`, not a disk read.
pub(crate) const DEFAULT_CACHE_BYTES: usize = 8 << 20;

/// How to open a [`Journal`].
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Commit durability; default [`Durability::Sync`].
    pub durability: Durability,
    /// redb page cache; default [`DEFAULT_CACHE_BYTES`].
    pub cache_bytes: usize,
    /// Limits applied by [`Journal::run_retention`].
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
            #[cfg(test)]
            failing_log: None,
        }
    }
}

/// Size and span of the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalStats {
    /// Number of records.
    pub records: u64,
    /// Size of the file on disk.
    pub file_bytes: u64,
    /// Logical size the `max_bytes` retention limit applies to.
    pub data_bytes: u64,
    /// Timestamp of the oldest record.
    pub oldest: Option<String>,
    /// Timestamp of the newest record.
    pub newest: Option<String>,
}

/// The open redb database, shared by the writer thread and the readers. Empty while the
/// writer re-opens it after a write failure (redb refuses every operation after an I/O
/// error until the file is closed and opened again).
#[derive(Debug, Default)]
pub(super) struct DbSlot(RwLock<Option<Arc<Database>>>);

impl DbSlot {
    fn lock_read(&self) -> std::sync::RwLockReadGuard<'_, Option<Arc<Database>>> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_write(&self) -> std::sync::RwLockWriteGuard<'_, Option<Arc<Database>>> {
        self.0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The database, unless it is being re-opened.
    pub(super) fn get(&self) -> Option<Arc<Database>> {
        self.lock_read().clone()
    }

    /// Takes the database out (readers see none until [`put`](Self::put)).
    pub(super) fn take(&self) -> Option<Arc<Database>> {
        self.lock_write().take()
    }

    /// Puts a (re-)opened database in.
    pub(super) fn put(&self, db: Arc<Database>) {
        *self.lock_write() = Some(db);
    }
}

/// The activity journal. `Send + Sync`; share it as `Arc<Journal>`.
pub struct Journal {
    db: Arc<DbSlot>,
    pub(super) options: JournalOptions,
    path: PathBuf,
    /// `Some` until drop; dropping it tells the writer to sync and stop.
    tx: Option<Sender<Command>>,
    /// [`MAX_QUEUED`] slots bounding the queue.
    slots: Arc<Semaphore>,
    /// Whether the writer queues finished records for sinks (see `outbox`).
    pub(super) outbox_on: Arc<AtomicBool>,
    writer: Option<JoinHandle<()>>,
    /// Set by retention while the journal is over its limits with only records younger than
    /// `min_age` left: new records are stored summarised (see `retention`).
    pub(super) pressure: AtomicBool,
    /// Records the write-ahead log restored at open.
    restored: usize,
    /// How far the writer has applied what was sent to it (reads wait for it in sync mode).
    applied: Arc<Applied>,
    /// Whether writes work (set by the writer thread).
    health: Arc<Health>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("durability", &self.options.durability)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens (or creates) the journal at `path`, creating the parent directory. A file left by
    /// a crash is repaired by redb here (1–2 s at 1M records), and the records its
    /// write-ahead log holds are written back (see [`restored_from_log`]
    /// (Self::restored_from_log)). Starts the writer thread;
    /// retention runs only through [`run_retention`](Self::run_retention) or
    /// [`spawn_retention`](Self::spawn_retention).
    pub fn open(path: &Path, mut options: JournalOptions) -> Result<Arc<Self>> {
        if options.write_faults.is_none()
            && let Some(flag) = std::env::var_os(WRITE_FAULT_ENV)
        {
            tracing::warn!(
                "{WRITE_FAULT_ENV} is set (a test hook): the activity journal's writes fail \
                 while {} exists",
                Path::new(&flag).display()
            );
            options.write_faults = Some(WriteFaults::while_file_exists(flag.into()));
        }
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::private_fs::create_private_dir(parent).map_err(io)?;
        }
        let faults = options.write_faults.as_ref();
        let mut db = open_database_with(path, options.cache_bytes, faults)?;
        guard(path, || {
            let txn = db.begin_write()?;
            txn.open_table(RECORDS)?;
            for def in INDEXES {
                txn.open_table(def)?;
            }
            txn.open_table(META)?;
            txn.open_table(outbox::OUTBOX)?;
            txn.open_table(outbox::OUTBOX_KEYS)?;
            txn.open_table(outbox::SINKS)?;
            txn.commit()?;
            Ok(())
        })?;
        let outbox_at_open = guard(path, || outbox::any_sink(&db))?;
        let (log, restored) = open_log(&db, path, &options, outbox_at_open)?;
        match compact_if_worthwhile(&mut db, path) {
            Ok(Some((before, after))) => tracing::info!(
                path = %path.display(),
                "compacted the activity journal from {before} to {after} bytes"
            ),
            Ok(None) => {}
            Err(e @ Error::Damaged { .. }) => return Err(e),
            Err(e) => tracing::warn!("activity journal compaction skipped: {e}"),
        }
        let db = Arc::new(db);
        let slot = Arc::new(DbSlot::default());
        slot.put(db.clone());
        let outbox_on = Arc::new(AtomicBool::new(outbox_at_open));
        let applied = Arc::new(Applied::default());
        let health = Arc::new(Health::default());
        let (tx, rx) = mpsc::channel();
        let writer_slot = slot.clone();
        let writer_outbox = outbox_on.clone();
        let writer_path = path.to_path_buf();
        let setup = WriterSetup {
            durability: options.durability,
            sync_carry: options.sync_carry,
            checkpoint_idle: options.checkpoint_idle,
            on_commit: options.on_commit.clone(),
            on_fsync: options.on_fsync.clone(),
            log,
            applied: applied.clone(),
            cache_bytes: options.cache_bytes,
            log_capacity: options.log_capacity,
            faults: options.write_faults.clone(),
            health: health.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("activity-writer".into())
            .spawn(move || {
                if matches!(setup.durability, Durability::Async { .. }) {
                    writer::yield_to_calls();
                }
                writer_loop(db, &writer_slot, &writer_path, &rx, &writer_outbox, setup);
            })
            .map_err(io)?;
        Ok(Arc::new(Self {
            db: slot,
            options,
            path: path.to_path_buf(),
            tx: Some(tx),
            slots: Arc::new(Semaphore::new(MAX_QUEUED)),
            outbox_on,
            writer: Some(writer),
            pressure: AtomicBool::new(false),
            restored,
            applied,
            health,
        }))
    }

    /// The redb database, unless the writer is re-opening it after a write failure
    /// ([`Error::Reopening`]). Take it per transaction; holding it keeps a failed file open.
    pub(super) fn db(&self) -> Result<Arc<Database>> {
        self.db.get().ok_or_else(|| Error::Reopening {
            reason: self.health.reason().unwrap_or_else(|| "unknown".to_owned()),
        })
    }

    /// Whether the journal writes (`ok`), or why not (`failing`): while it fails, records
    /// somebody waits for (a call's `pending` record) are refused with
    /// [`Error::Unwritable`] and the writer retries by itself.
    pub fn health(&self) -> JournalHealth {
        self.health.show()
    }

    /// Whether writes fail now (see [`health`](Self::health)).
    pub fn is_failing(&self) -> bool {
        self.health.is_failing()
    }

    /// The error a refused write is answered with.
    fn unwritable(&self) -> Error {
        Error::Unwritable {
            reason: self.health.reason().unwrap_or_else(|| "unknown".to_owned()),
        }
    }

    /// What a write the writer answered with `text` failed with: [`Error::Unwritable`]
    /// while the journal fails, else [`Error::Write`].
    fn write_error(&self, text: String) -> Error {
        if self.health.is_failing() {
            self.unwritable()
        } else {
            Error::Write(text)
        }
    }

    /// How many records [`open`](Self::open) wrote back from the write-ahead log: records
    /// acknowledged before a crash that the redb file did not yet hold.
    pub fn restored_from_log(&self) -> usize {
        self.restored
    }

    /// Writes everything queued before the call into the redb file with an `Immediate`
    /// commit; in sync mode the write-ahead log then starts over, empty. Blocking (it waits
    /// for the writer thread), so from async code call it through `spawn_blocking`.
    pub fn checkpoint(&self) -> Result<()> {
        let (ack, done) = mpsc::channel();
        self.send(Command::Checkpoint(ack))?;
        match done.recv() {
            Ok(result) => result.map_err(|text| self.write_error(text)),
            Err(_) => Err(Error::Closed),
        }
    }

    /// The file this journal lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it was opened with.
    pub fn options(&self) -> &JournalOptions {
        &self.options
    }

    fn send(&self, command: Command) -> Result<()> {
        let tx = self.tx.as_ref().ok_or(Error::Closed)?;
        if matches!(command, Command::Put(_) | Command::Record(_)) {
            self.applied.sending();
        }
        tx.send(command).map_err(|_| Error::Closed)
    }

    /// Whether retention found the journal under pressure (see `retention`): new records
    /// are stored summarised until it is not.
    pub fn under_pressure(&self) -> bool {
        self.pressure.load(Ordering::Relaxed)
    }

    /// Runs a read (or write) of the file under [`guard`], once it holds every record sent
    /// before the call ([`catch_up`](Self::catch_up)).
    /// A storage failure (a full disk) met here, outside the writer thread (retention, sink
    /// cursors, reads of a file redb closed after an I/O error), is passed to the writer,
    /// which re-opens the file and retries (see [`health`](Self::health)).
    pub(super) fn guard<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.catch_up();
        let result = guard(&self.path, f);
        if let Err(e @ Error::Storage(_)) = &result
            && !self.health.is_failing()
            && let Some(failure) = writer::Failure::of(e)
        {
            let _ = self.send(Command::Failed(failure));
        }
        result
    }

    /// In sync mode, waits until the writer has applied to the file every record whose
    /// `append`, `upsert` or `submit` returned before this call, so a read sees them (with
    /// the write-ahead log, records are acknowledged once logged and applied a moment later;
    /// this asks the writer to apply them now). Usually well under a millisecond; gives up
    /// after 10 s with a warning. Async mode reads what is committed, as documented.
    pub(crate) fn catch_up(&self) {
        if !matches!(self.options.durability, Durability::Sync) {
            return;
        }
        let (sent, caught_up) = self.applied.caught_up();
        if caught_up || self.send(Command::Apply).is_err() {
            return;
        }
        if !self.applied.wait_for(sent, CATCH_UP_TIMEOUT) {
            tracing::warn!(
                "the activity journal's writer has not applied the latest records after {}s; \
                 reading without them",
                CATCH_UP_TIMEOUT.as_secs()
            );
        }
    }

    async fn put(&self, record: ActivityRecord) -> Result<()> {
        // Fail closed: while the journal cannot write, a record is refused at once (in async
        // mode too, once the writer has found out), and the caller does not run its call.
        if self.health.is_failing() {
            return Err(self.unwritable());
        }
        // Sync mode's caller waits for the commit: the record is encoded here, so an error
        // comes back to it. Async mode's does not: the writer encodes the record.
        let encoded = match self.options.durability {
            Durability::Sync => Some(Put::new(&record, self.under_pressure())?),
            Durability::Async { .. } => None,
        };
        let slot = self.slots.clone().acquire_owned().await;
        let slot = Some(slot.map_err(|_| Error::Closed)?);
        let Some(mut put) = encoded else {
            return self.send(Command::Record(self.unencoded(record, slot)));
        };
        put.slot = slot;
        let (ack, done) = oneshot::channel();
        put.ack = Some(ack);
        self.send(Command::Put(put))?;
        match done.await {
            Ok(result) => result.map_err(|text| self.write_error(text)),
            Err(_) => Err(Error::Closed),
        }
    }

    /// Writes a new record. In Sync mode this resolves after the group commit that contains
    /// it; in Async mode once it is queued (the writer thread encodes it, and logs a record it
    /// cannot encode, such as one whose id is not a ULID). (A record with an existing id
    /// replaces it, as [`upsert`](Self::upsert) does.) Dropping the future does not cancel the
    /// write.
    pub async fn append(&self, record: ActivityRecord) -> Result<()> {
        self.put(record).await
    }

    /// Writes `record`, replacing any record with the same id and moving its index entries
    /// (e.g. status pending → success). Resolves like [`append`](Self::append).
    pub async fn upsert(&self, record: ActivityRecord) -> Result<()> {
        self.put(record).await
    }

    /// Fire-and-forget [`upsert`](Self::upsert): never blocks; errors are logged. It takes a
    /// queue slot if one is free but never waits for one, so it is not held back by
    /// [`MAX_QUEUED`]. The writer thread encodes the record, not the caller (a call's outcome
    /// is submitted on its way back to the client).
    pub fn submit(&self, record: ActivityRecord) {
        let slot = self.slots.clone().try_acquire_owned().ok();
        let id = record.id.clone();
        if let Err(e) = self.send(Command::Record(self.unencoded(record, slot))) {
            tracing::error!(%id, "activity record dropped: {e}");
        }
    }

    /// `record` as the writer encodes it, summarised if the journal is under pressure now.
    fn unencoded(&self, record: ActivityRecord, slot: Option<OwnedSemaphorePermit>) -> Unencoded {
        Unencoded {
            record: Box::new(record),
            summarise: self.under_pressure(),
            slot,
        }
    }

    /// Returns once everything queued before the call is durable on disk.
    pub async fn flush(&self) -> Result<()> {
        let (ack, done) = oneshot::channel();
        self.send(Command::Flush(ack))?;
        match done.await {
            Ok(result) => result.map_err(|text| self.write_error(text)),
            Err(_) => Err(Error::Closed),
        }
    }

    /// The record with this id. An id that is not a ULID is [`Error::InvalidId`]; a stored row
    /// that does not parse is [`Error::Corrupt`].
    pub fn get(&self, id: &str) -> Result<Option<ActivityRecord>> {
        let key = parse_key(id)?;
        self.guard(|| self.get_key(id, key))
    }

    fn get_key(&self, id: &str, key: [u8; 16]) -> Result<Option<ActivityRecord>> {
        let txn = self.db()?.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let Some(row) = table.get(key)? else {
            return Ok(None);
        };
        serde_json::from_slice(row.value())
            .map(Some)
            .map_err(|source| Error::Corrupt {
                id: id.to_string(),
                source,
            })
    }

    /// Number of records.
    pub fn len(&self) -> Result<u64> {
        self.guard(|| {
            let txn = self.db()?.begin_read()?;
            Ok(txn.open_table(RECORDS)?.len()?)
        })
    }

    /// Whether the journal holds no record.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Counts, sizes and the time span.
    pub fn stats(&self) -> Result<JournalStats> {
        self.guard(|| self.read_stats())
    }

    fn read_stats(&self) -> Result<JournalStats> {
        let txn = self.db()?.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let ts = |row: Option<(redb::AccessGuard<'_, [u8; 16]>, _)>| {
            row.map(|(k, _)| format_timestamp(key_ms(&k.value())))
        };
        let data_bytes = txn
            .open_table(META)?
            .get(DATA_BYTES)?
            .map_or(0, |g| g.value());
        let file_bytes = std::fs::metadata(&self.path)
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })?
            .len();
        Ok(JournalStats {
            records: table.len()?,
            file_bytes,
            data_bytes,
            oldest: ts(table.first()?),
            newest: ts(table.last()?),
        })
    }

    /// Closes the records a previous process left `pending` (it stopped or crashed while
    /// their calls were in flight): each becomes `error` with a message saying the outcome
    /// is unknown, so it is complete in the journal and reaches the sinks. Call it once at
    /// startup, before any call starts: this process owns the file, so nothing of its own
    /// is pending yet. Returns how many were closed.
    pub async fn close_interrupted(&self) -> Result<usize> {
        let pending = super::Filter {
            status: Some(Status::Pending),
            ..super::Filter::default()
        };
        let mut closed = 0;
        loop {
            let page = self.query(&pending, 1000, 0)?;
            if page.records.is_empty() {
                return Ok(closed);
            }
            for mut rec in page.records {
                rec.status = Status::Error;
                rec.error_message = Some(
                    "mcpproxy stopped before this call finished; whether the upstream ran it is unknown"
                        .to_owned(),
                );
                self.upsert(rec).await?;
                closed += 1;
            }
            // In async durability an upsert is acknowledged before it is committed: commit
            // this page before querying the next, or the same records would come back.
            self.flush().await?;
        }
    }

    /// Writes `records` in transactions of up to [`MAX_BATCH`] with the writer's code path,
    /// bypassing the channel (for benches and imports). Not synchronized with the writer's
    /// durability mode: each transaction is committed `Immediate`.
    #[doc(hidden)]
    pub fn bulk_load(&self, records: &[ActivityRecord]) -> Result<()> {
        for chunk in records.chunks(MAX_BATCH) {
            let puts = chunk
                .iter()
                .map(|r| Put::new(r, false))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Put> = puts.iter().collect();
            let outbox = self.outbox_on.load(Ordering::SeqCst);
            self.guard(|| commit_puts(&*self.db()?, &refs, redb::Durability::Immediate, outbox))?;
        }
        Ok(())
    }
}

/// Opens sync mode's write-ahead log beside `path` and replays what it holds into `db`. A
/// log is replayed in either mode (an async-mode start after a sync-mode crash replays it,
/// then removes the file). Returns the log to append to (sync mode with a `log_capacity`,
/// unless the file cannot be created: then every commit is `Immediate`) and how many records
/// the replay wrote.
fn open_log(
    db: &Database,
    path: &Path,
    options: &JournalOptions,
    outbox: bool,
) -> Result<(Option<WriteAheadLog>, usize)> {
    let log_path = wal::path_for(path);
    let io = |source| Error::Io {
        path: log_path.clone(),
        source,
    };
    let wanted = options.durability == Durability::Sync && options.log_capacity > 0;
    let existed = log_path.exists();
    if !wanted && !existed {
        return Ok((None, 0));
    }
    let (mut log, payloads) = match WriteAheadLog::open(&log_path, options.log_capacity) {
        Ok(opened) => opened,
        Err(e) if !existed => {
            tracing::warn!(
                log = %log_path.display(),
                "cannot create the activity write-ahead log ({e}); every record in sync mode \
                 costs a full journal commit"
            );
            return Ok((None, 0));
        }
        Err(e) => return Err(io(e)),
    };
    let restored = guard(path, || writer::replay(db, payloads, outbox))?;
    if restored > 0 {
        tracing::info!(
            log = %log_path.display(),
            "restored {restored} activity records from the write-ahead log"
        );
    }
    if wanted {
        log.faults = options.write_faults.clone();
        log.start_over().map_err(io)?;
        #[cfg(test)]
        {
            log.failing = options.failing_log.clone();
        }
        Ok((Some(log), restored))
    } else {
        drop(log);
        std::fs::remove_file(&log_path).map_err(io)?;
        Ok((None, restored))
    }
}

/// Opens the redb file, telling a file another process holds ([`Error::Locked`]) from a
/// damaged one ([`Error::Damaged`]) and from an I/O failure ([`Error::Io`]).
pub(super) fn open_database(path: &Path, cache_bytes: usize) -> Result<Database> {
    open_database_with(path, cache_bytes, None)
}

/// [`open_database`], its writes failing while `faults` are on.
pub(super) fn open_database_with(
    path: &Path,
    cache_bytes: usize,
    faults: Option<&WriteFaults>,
) -> Result<Database> {
    let shown = path.display().to_string();
    let repair_logged = AtomicBool::new(false);
    let mut builder = Database::builder();
    builder
        .set_cache_size(cache_bytes)
        .set_repair_callback(move |_session| {
            if !repair_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(path = %shown, "activity journal was not closed cleanly; repairing");
            }
        });
    // redb creates a missing file with the umask's mode: made (or narrowed to) 0600 first.
    crate::private_fs::prepare_private_file(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let opened = std::panic::catch_unwind(AssertUnwindSafe(|| match faults {
        None => builder.create(path),
        Some(faults) => storage::FaultyBackend::open(path, faults.clone())
            .map_err(redb::DatabaseError::from)
            .and_then(|backend| builder.create_with_backend(backend)),
    }));
    let damaged = |detail: String| Error::Damaged {
        path: path.to_path_buf(),
        detail,
    };
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(redb::DatabaseError::DatabaseAlreadyOpen)) => Err(Error::Locked {
            path: path.to_path_buf(),
        }),
        Ok(Err(redb::DatabaseError::Storage(redb::StorageError::Io(source)))) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
        Ok(Err(
            e @ (redb::DatabaseError::RepairAborted
            | redb::DatabaseError::Storage(redb::StorageError::Corrupted(_))),
        )) => Err(damaged(e.to_string())),
        Ok(Err(e)) => Err(e.into()),
        Err(panic) => Err(damaged(panic_text(panic.as_ref()))),
    }
}

/// Runs `f` (a transaction on the journal at `path`), turning a panic inside redb and a
/// corruption error into [`Error::Damaged`]. redb panics on some damaged pages instead of
/// returning an error; the transaction is dropped while unwinding, so nothing stays held.
pub(super) fn guard<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let damaged = |detail: String| Error::Damaged {
        path: path.to_path_buf(),
        detail,
    };
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Err(Error::Storage(redb::Error::Corrupted(detail)))) => Err(damaged(detail)),
        Ok(Err(Error::Storage(e @ redb::Error::LockPoisoned(_)))) => Err(damaged(format!(
            "an earlier read failed and left it unusable: {e}"
        ))),
        Ok(result) => result,
        Err(panic) => Err(damaged(panic_text(panic.as_ref()))),
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown failure".to_owned());
    format!("reading a page failed: {text}")
}

/// Free space worth giving back: more than this, or more than a quarter of the file.
const COMPACT_FREE_BYTES: u64 = 64 << 20;
/// Files smaller than this are never compacted (not worth the rewrite).
const COMPACT_MIN_FILE: u64 = 1 << 20;

/// Compacts `db` when a large part of its file is free space: more than
/// [`COMPACT_FREE_BYTES`] or a quarter of the file (files under [`COMPACT_MIN_FILE`] are
/// left alone). Needs the only handle on the database with no transaction open, hence only
/// at open. Returns the file size before and after, when it compacted.
pub(super) fn compact_if_worthwhile(db: &mut Database, path: &Path) -> Result<Option<(u64, u64)>> {
    let file_len = |path: &Path| {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })
    };
    let before = file_len(path)?;
    if before < COMPACT_MIN_FILE {
        return Ok(None);
    }
    // Cheap first look: the logical data against the file; the page walk only if it may pay.
    let data_bytes = guard(path, || {
        let txn = db.begin_read()?;
        Ok(txn
            .open_table(META)?
            .get(DATA_BYTES)?
            .map_or(0, |g| g.value()))
    })?;
    if data_bytes.saturating_mul(4) / 3 >= before {
        return Ok(None);
    }
    let free = guard(path, || {
        let txn = db.begin_write()?;
        let stats = txn.stats()?;
        txn.abort()?;
        Ok(stats.fragmented_bytes())
    })?;
    if free < COMPACT_FREE_BYTES && free.saturating_mul(4) < before {
        return Ok(None);
    }
    guard(path, || {
        db.compact()
            .map_err(|e| Error::Write(format!("compaction failed: {e}")))
    })?;
    Ok(Some((before, file_len(path)?)))
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Closing the channel makes the writer drain what is queued, sync and stop.
        drop(self.tx.take());
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!("activity journal writer thread panicked");
        }
    }
}
