//! The journal: a redb file written by one writer thread with group commit.
//!
//! Producers serialize their record, then queue it on a channel. The writer thread takes
//! everything queued (up to [`MAX_BATCH`]) into one write transaction and commits it:
//!
//! - [`Durability::Sync`]: every commit is `Immediate` (one fsync); `append` resolves after
//!   the commit holding its record, so an acknowledged record survives `kill -9` and power loss.
//! - [`Durability::Async`]: `append` resolves once queued (at most [`MAX_QUEUED`] wait;
//!   past that `append` waits for the writer); the writer commits with redb's
//!   `Durability::None` and makes an `Immediate` commit at least every `flush` while anything
//!   is unsynced (and on [`Journal::flush`] and drop). A crash loses at most the last `flush`
//!   of records.
//!
//! A put replaces any row with the same id and moves its index entries (pending → success).
//! If a batch fails, each record is retried in its own transaction so one bad record does not
//! fail its neighbours. Reads (`get`, `query`, `stats`) run on the caller's thread in redb read
//! transactions; a page of 50 takes ~0.2 ms, so calling them inline from async code is fine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
    WriteTransaction,
};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::outbox;
use super::record::{ActivityRecord, Status, format_timestamp};
use super::retention::Retention;
use super::{Error, Result};

/// The records: ULID bytes → record JSON.
pub(super) const RECORDS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("activity");
/// An index table: `(key, ULID bytes)` → `()`.
pub(super) type IndexTable = TableDefinition<'static, (&'static str, [u8; 16]), ()>;
/// Number of index tables.
pub(super) const N_INDEXES: usize = 5;
/// Position of each index in [`INDEXES`] and [`IndexKeys`].
pub(super) const IDX_INTENT: usize = 0;
pub(super) const IDX_SERVER: usize = 1;
pub(super) const IDX_TOOL: usize = 2;
pub(super) const IDX_STATUS: usize = 3;
pub(super) const IDX_TYPE: usize = 4;
/// The index tables, in `IDX_*` order.
pub(super) const INDEXES: [IndexTable; N_INDEXES] = [
    TableDefinition::new("activity_by_intent"),
    TableDefinition::new("activity_by_server"),
    TableDefinition::new("activity_by_tool"),
    TableDefinition::new("activity_by_status"),
    TableDefinition::new("activity_by_type"),
];
/// Small counters (the logical data size).
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("activity_meta");
/// Key in [`META`]: sum of [`row_cost`] over all rows.
pub(super) const DATA_BYTES: &str = "data_bytes";

/// Most records committed in one transaction.
pub const MAX_BATCH: usize = 10_000;

/// Most records `append`/`upsert` let wait in the queue: past this they wait for the writer
/// (without it, Async mode under a flood queues without bound: ~1 GB in the bench).
pub const MAX_QUEUED: usize = 2 * MAX_BATCH;

/// The index keys of one record, in `IDX_*` order (`None`: not indexed there).
pub(super) type IndexKeys = [Option<String>; N_INDEXES];

/// The index keys of `rec`: intent type, server, `server:tool`, status, type.
pub(super) fn index_keys(rec: &ActivityRecord) -> IndexKeys {
    [
        rec.intent_type(),
        Some(rec.server_name.clone()),
        Some(format!("{}:{}", rec.server_name, rec.tool_name)),
        Some(rec.status.as_str().to_string()),
        Some(rec.record_type.as_str().to_string()),
    ]
}

/// Logical size of a row: key + JSON + its index entries. Retention's `max_bytes` applies to
/// the sum of these, not to the file (which redb grows and reuses, but never shrinks).
pub(super) fn row_cost(json_len: usize, keys: &IndexKeys) -> u64 {
    let index: usize = keys.iter().flatten().map(|k| k.len() + 16).sum();
    (16 + json_len + index) as u64
}

/// Parses a 26-char ULID into its storage key.
pub(super) fn parse_key(id: &str) -> Result<[u8; 16]> {
    ulid::Ulid::from_string(id)
        .map(|u| u.to_bytes())
        .map_err(|_| Error::InvalidId(id.to_string()))
}

/// The unix milliseconds of a storage key.
pub(super) fn key_ms(key: &[u8; 16]) -> u64 {
    ulid::Ulid::from_bytes(*key).timestamp_ms()
}

/// The id string of a storage key.
pub(super) fn key_id(key: &[u8; 16]) -> String {
    ulid::Ulid::from_bytes(*key).to_string()
}

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

/// How to open a [`Journal`].
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Commit durability; default [`Durability::Sync`].
    pub durability: Durability,
    /// redb page cache; default 64 MiB (redb's own default of 1 GiB drives RSS to ~1 GB).
    pub cache_bytes: usize,
    /// Limits applied by [`Journal::run_retention`].
    pub retention: Retention,
    /// Period of [`Journal::spawn_retention`]; default 60 s.
    pub retention_interval: Duration,
    /// Records deleted per retention transaction; default 10 000.
    pub retention_batch: usize,
}

impl Default for JournalOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Sync,
            cache_bytes: 64 << 20,
            retention: Retention::default(),
            retention_interval: Duration::from_secs(60),
            retention_batch: 10_000,
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

type Ack = oneshot::Sender<std::result::Result<(), String>>;

/// A record ready for the writer.
pub(super) struct Put {
    pub(super) key: [u8; 16],
    pub(super) json: Vec<u8>,
    pub(super) keys: IndexKeys,
    ack: Option<Ack>,
    /// A queue slot, released when the writer is done with the record.
    slot: Option<OwnedSemaphorePermit>,
}

impl Put {
    /// Serializes `record` and computes its key and index keys.
    pub(super) fn new(record: &ActivityRecord) -> Result<Self> {
        let key = parse_key(&record.id)?;
        let json = serde_json::to_vec(record).map_err(|source| Error::Encode {
            id: record.id.clone(),
            source,
        })?;
        Ok(Self {
            key,
            json,
            keys: index_keys(record),
            ack: None,
            slot: None,
        })
    }
}

enum Command {
    Put(Put),
    Flush(Ack),
}

/// The activity journal. `Send + Sync`; share it as `Arc<Journal>`.
pub struct Journal {
    pub(super) db: Arc<Database>,
    pub(super) options: JournalOptions,
    path: PathBuf,
    /// `Some` until drop; dropping it tells the writer to sync and stop.
    tx: Option<Sender<Command>>,
    /// [`MAX_QUEUED`] slots bounding the queue.
    slots: Arc<Semaphore>,
    /// Whether the writer queues finished records for sinks (see `outbox`).
    pub(super) outbox_on: Arc<AtomicBool>,
    writer: Option<JoinHandle<()>>,
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
    /// a crash is repaired by redb here (1–2 s at 1M records). Starts the writer thread;
    /// retention runs only through [`run_retention`](Self::run_retention) or
    /// [`spawn_retention`](Self::spawn_retention).
    pub fn open(path: &Path, options: JournalOptions) -> Result<Arc<Self>> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let shown = path.display().to_string();
        let repair_logged = AtomicBool::new(false);
        let db = Database::builder()
            .set_cache_size(options.cache_bytes)
            .set_repair_callback(move |_session| {
                if !repair_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(path = %shown, "activity journal was not closed cleanly; repairing");
                }
            })
            .create(path)?;
        let db = Arc::new(db);
        {
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
        }
        let outbox_on = Arc::new(AtomicBool::new(outbox::any_sink(&db)?));
        let (tx, rx) = mpsc::channel();
        let writer_db = db.clone();
        let durability = options.durability;
        let writer_outbox = outbox_on.clone();
        let writer = std::thread::Builder::new()
            .name("activity-writer".into())
            .spawn(move || writer_loop(&writer_db, &rx, durability, &writer_outbox))
            .map_err(io)?;
        Ok(Arc::new(Self {
            db,
            options,
            path: path.to_path_buf(),
            tx: Some(tx),
            slots: Arc::new(Semaphore::new(MAX_QUEUED)),
            outbox_on,
            writer: Some(writer),
        }))
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
        tx.send(command).map_err(|_| Error::Closed)
    }

    async fn put(&self, record: &ActivityRecord) -> Result<()> {
        let mut put = Put::new(record)?;
        let slot = self.slots.clone().acquire_owned().await;
        put.slot = Some(slot.map_err(|_| Error::Closed)?);
        match self.options.durability {
            Durability::Async { .. } => self.send(Command::Put(put)),
            Durability::Sync => {
                let (ack, done) = oneshot::channel();
                put.ack = Some(ack);
                self.send(Command::Put(put))?;
                match done.await {
                    Ok(result) => result.map_err(Error::Write),
                    Err(_) => Err(Error::Closed),
                }
            }
        }
    }

    /// Writes a new record. In Sync mode this resolves after the group commit that contains
    /// it; in Async mode once it is queued. (A record with an existing id replaces it, as
    /// [`upsert`](Self::upsert) does.) Dropping the future does not cancel the write.
    pub async fn append(&self, record: ActivityRecord) -> Result<()> {
        self.put(&record).await
    }

    /// Writes `record`, replacing any record with the same id and moving its index entries
    /// (e.g. status pending → success). Resolves like [`append`](Self::append).
    pub async fn upsert(&self, record: ActivityRecord) -> Result<()> {
        self.put(&record).await
    }

    /// Fire-and-forget [`upsert`](Self::upsert): never blocks; errors are logged. It takes a
    /// queue slot if one is free but never waits for one, so it is not held back by
    /// [`MAX_QUEUED`].
    pub fn submit(&self, record: ActivityRecord) {
        let queued = Put::new(&record).and_then(|mut put| {
            put.slot = self.slots.clone().try_acquire_owned().ok();
            self.send(Command::Put(put))
        });
        if let Err(e) = queued {
            tracing::error!(id = %record.id, "activity record dropped: {e}");
        }
    }

    /// Returns once everything queued before the call is durable on disk.
    pub async fn flush(&self) -> Result<()> {
        let (ack, done) = oneshot::channel();
        self.send(Command::Flush(ack))?;
        match done.await {
            Ok(result) => result.map_err(Error::Write),
            Err(_) => Err(Error::Closed),
        }
    }

    /// The record with this id. An id that is not a ULID is [`Error::InvalidId`]; a stored row
    /// that does not parse is [`Error::Corrupt`].
    pub fn get(&self, id: &str) -> Result<Option<ActivityRecord>> {
        let key = parse_key(id)?;
        let txn = self.db.begin_read()?;
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
        let txn = self.db.begin_read()?;
        Ok(txn.open_table(RECORDS)?.len()?)
    }

    /// Whether the journal holds no record.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Counts, sizes and the time span.
    pub fn stats(&self) -> Result<JournalStats> {
        let txn = self.db.begin_read()?;
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
            status: Some(Status::Pending.as_str().to_owned()),
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
            let puts = chunk.iter().map(Put::new).collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Put> = puts.iter().collect();
            let outbox = self.outbox_on.load(Ordering::SeqCst);
            commit_puts(&self.db, &refs, redb::Durability::Immediate, outbox)?;
        }
        Ok(())
    }
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

/// Writes `puts` into `txn`: replaces rows, moves index entries, keeps the size counter,
/// and (with `outbox`) queues each finished record for the sinks.
pub(super) fn apply_puts(txn: &WriteTransaction, puts: &[&Put], outbox: bool) -> Result<()> {
    let mut records = txn.open_table(RECORDS)?;
    let mut indexes = Vec::with_capacity(N_INDEXES);
    for def in INDEXES {
        indexes.push(txn.open_table(def)?);
    }
    let mut meta = txn.open_table(META)?;
    let mut bytes = meta.get(DATA_BYTES)?.map_or(0, |g| g.value());
    for put in puts {
        let old = records
            .insert(put.key, put.json.as_slice())?
            .map(|g| g.value().to_vec());
        if let Some(old) = old {
            match serde_json::from_slice::<ActivityRecord>(&old) {
                Ok(old_rec) => {
                    let old_keys = index_keys(&old_rec);
                    bytes = bytes.saturating_sub(row_cost(old.len(), &old_keys));
                    for (i, (old_key, new_key)) in old_keys.iter().zip(&put.keys).enumerate() {
                        if let Some(k) = old_key
                            && old_key != new_key
                        {
                            indexes[i].remove((k.as_str(), put.key))?;
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        id = %key_id(&put.key),
                        "replacing a corrupt activity row; its old index entries stay behind: {e}"
                    );
                    bytes = bytes.saturating_sub(16 + old.len() as u64);
                }
            }
        }
        for (index, key) in indexes.iter_mut().zip(&put.keys) {
            if let Some(k) = key {
                index.insert((k.as_str(), put.key), ())?;
            }
        }
        bytes = bytes.saturating_add(row_cost(put.json.len(), &put.keys));
    }
    meta.insert(DATA_BYTES, bytes)?;
    drop((records, indexes, meta));
    if outbox {
        let finished: Vec<[u8; 16]> = puts
            .iter()
            .filter(|put| put.keys[IDX_STATUS].as_deref() != Some(Status::Pending.as_str()))
            .map(|put| put.key)
            .collect();
        outbox::enqueue(txn, &finished)?;
    }
    Ok(())
}

/// One write transaction with `puts`, committed with `durability`.
fn commit_puts(
    db: &Database,
    puts: &[&Put],
    durability: redb::Durability,
    outbox: bool,
) -> Result<()> {
    let mut txn = db.begin_write()?;
    txn.set_durability(durability)?;
    apply_puts(&txn, puts, outbox)?;
    txn.commit()?;
    Ok(())
}

/// An empty `Immediate` commit: persists every earlier `None` commit.
fn sync(db: &Database) -> Result<()> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    txn.commit()?;
    Ok(())
}

fn ack(put: Put, result: &Result<()>) {
    match (put.ack, result) {
        (Some(ack), result) => {
            let _ = ack.send(result.as_ref().map(|_| ()).map_err(ToString::to_string));
        }
        (None, Err(e)) => {
            tracing::error!(id = %key_id(&put.key), "activity record was not written: {e}");
        }
        (None, Ok(())) => {}
    }
}

fn writer_loop(
    db: &Database,
    rx: &Receiver<Command>,
    durability: Durability,
    outbox_on: &AtomicBool,
) {
    let flush_every = match durability {
        Durability::Sync => None,
        Durability::Async { flush } => Some(flush),
    };
    // Async mode: when the oldest not-yet-fsync'd commit happened.
    let mut unsynced_since: Option<Instant> = None;
    let sync_or_log = |unsynced: &mut Option<Instant>| match sync(db) {
        Ok(()) => {
            *unsynced = None;
            Ok(())
        }
        Err(e) => {
            tracing::error!("activity journal fsync failed: {e}");
            Err(e)
        }
    };
    loop {
        let first = match (flush_every, unsynced_since) {
            (Some(flush), Some(since)) => {
                match rx.recv_timeout(flush.saturating_sub(since.elapsed())) {
                    Ok(command) => command,
                    Err(RecvTimeoutError::Timeout) => {
                        let _ = sync_or_log(&mut unsynced_since);
                        if unsynced_since.is_some() {
                            // Failed: retry after another period rather than spin.
                            unsynced_since = Some(Instant::now());
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        let _ = sync_or_log(&mut unsynced_since);
                        return;
                    }
                }
            }
            _ => match rx.recv() {
                Ok(command) => command,
                Err(_) => return,
            },
        };
        let mut puts = Vec::new();
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(command) = next {
            match command {
                Command::Put(put) => puts.push(put),
                Command::Flush(ack) => flushes.push(ack),
            }
            next = if puts.len() < MAX_BATCH {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        let immediate = match flush_every {
            None => true,
            Some(flush) => {
                !flushes.is_empty() || unsynced_since.is_some_and(|t| t.elapsed() >= flush)
            }
        };
        let mut flush_result = Ok(());
        if !puts.is_empty() {
            let durability = if immediate {
                redb::Durability::Immediate
            } else {
                redb::Durability::None
            };
            let refs: Vec<&Put> = puts.iter().collect();
            let outbox = outbox_on.load(Ordering::SeqCst);
            let result = commit_puts(db, &refs, durability, outbox);
            match result {
                Ok(()) => {
                    if immediate {
                        unsynced_since = None;
                    } else {
                        unsynced_since.get_or_insert_with(Instant::now);
                    }
                    puts.into_iter().for_each(|put| ack(put, &Ok(())));
                }
                Err(e) if puts.len() > 1 => {
                    tracing::warn!(
                        "activity group commit of {} records failed ({e}); retrying one by one",
                        puts.len()
                    );
                    for put in puts {
                        let result = commit_puts(db, &[&put], durability, outbox);
                        if result.is_ok() && !immediate {
                            unsynced_since.get_or_insert_with(Instant::now);
                        }
                        ack(put, &result);
                    }
                    if immediate {
                        flush_result = sync_or_log(&mut unsynced_since);
                    }
                }
                Err(e) => {
                    puts.into_iter()
                        .for_each(|put| ack(put, &Err(Error::Write(e.to_string()))));
                    if immediate {
                        flush_result = sync_or_log(&mut unsynced_since);
                    }
                }
            }
        } else if immediate && unsynced_since.is_some() {
            flush_result = sync_or_log(&mut unsynced_since);
        }
        for done in flushes {
            let _ = done.send(
                flush_result
                    .as_ref()
                    .map(|_| ())
                    .map_err(ToString::to_string),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::record::{Status, new_id, now_ms};
    use crate::activity::test_util::{check_indexes, open_temp, rec_at};
    use crate::activity::{Filter, RecordType, Source};
    use std::io::{BufRead, BufReader};
    use std::process::{Command as Process, Stdio};

    fn status_filter(s: &str) -> Filter {
        Filter {
            status: Some(s.into()),
            ..Filter::default()
        }
    }

    #[tokio::test]
    async fn append_get_upsert_keep_indexes_right() {
        let (_dir, j) = open_temp(JournalOptions::default());
        assert!(j.is_empty().unwrap());
        let mut rec = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "github", "create");
        rec.tool_variant = Some("call_tool_write".into());
        j.append(rec.clone()).await.unwrap();
        assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(&rec));
        assert_eq!(
            j.query(&status_filter("pending"), 10, 0).unwrap().records,
            vec![rec.clone()]
        );
        check_indexes(&j);

        rec.status = Status::Success;
        rec.duration_ms = 42;
        rec.server_name = "gitlab".into();
        j.upsert(rec.clone()).await.unwrap();
        assert_eq!(j.len().unwrap(), 1);
        assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(&rec));
        assert!(
            j.query(&status_filter("pending"), 10, 0)
                .unwrap()
                .records
                .is_empty()
        );
        assert_eq!(
            j.query(&status_filter("success"), 10, 0).unwrap().records,
            vec![rec.clone()]
        );
        let github = Filter {
            server: Some("github".into()),
            ..Filter::default()
        };
        assert!(j.query(&github, 10, 0).unwrap().records.is_empty());
        check_indexes(&j);

        // submit is a fire-and-forget upsert.
        rec.status = Status::Error;
        j.submit(rec.clone());
        j.flush().await.unwrap();
        assert_eq!(j.get(&rec.id).unwrap().unwrap().status, Status::Error);
        check_indexes(&j);

        let stats = j.stats().unwrap();
        assert_eq!(stats.records, 1);
        assert_eq!(stats.oldest.as_deref(), Some(rec.timestamp.as_str()));
        assert!(stats.file_bytes > 0 && stats.data_bytes > 0);
    }

    #[tokio::test]
    async fn interrupted_calls_are_closed_at_startup_and_queued_for_sinks() {
        let (_dir, j) = open_temp(JournalOptions::default());
        j.register_sinks(&["s".to_string()]).unwrap();
        let left = rec_at(now_ms(), "s", "t", "write", Status::Pending);
        j.append(left.clone()).await.unwrap();
        let done = rec_at(now_ms() + 1, "s", "t", "read", Status::Success);
        j.append(done.clone()).await.unwrap();
        assert_eq!(j.close_interrupted().await.unwrap(), 1);
        let closed = j.get(&left.id).unwrap().unwrap();
        assert_eq!(closed.status, Status::Error);
        assert!(closed.error_message.unwrap().contains("unknown"));
        assert_eq!(j.get(&done.id).unwrap().unwrap(), done);
        assert_eq!(j.close_interrupted().await.unwrap(), 0);
        let batch = j.sink_batch("s", 10, 1 << 20).unwrap().unwrap();
        assert_eq!(
            batch.records.len(),
            2,
            "the closed record goes to the sinks too"
        );
        check_indexes(&j);
    }

    #[tokio::test]
    async fn bad_ids_and_corrupt_rows_do_not_panic() {
        let (_dir, j) = open_temp(JournalOptions::default());
        assert!(matches!(j.get("nope"), Err(Error::InvalidId(_))));
        assert!(j.get("").is_err());
        let msg = j
            .get("ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("expected a 26-character ULID"), "{msg}");
        assert_eq!(j.get(&new_id().0).unwrap(), None);
        let bad = ActivityRecord {
            id: "not-a-ulid".into(),
            ..Default::default()
        };
        assert!(matches!(
            j.append(bad.clone()).await,
            Err(Error::InvalidId(_))
        ));
        j.submit(bad); // logged, not written
        j.flush().await.unwrap();
        assert_eq!(j.len().unwrap(), 0);

        // A corrupt row: get reports it, queries skip it, upserts and retention replace it.
        let good = rec_at(now_ms(), "s", "t", "read", Status::Success);
        j.append(good.clone()).await.unwrap();
        let (corrupt_id, _) = new_id();
        {
            let txn = j.db.begin_write().unwrap();
            txn.open_table(RECORDS)
                .unwrap()
                .insert(parse_key(&corrupt_id).unwrap(), b"{not json".as_slice())
                .unwrap();
            txn.commit().unwrap();
        }
        assert!(matches!(j.get(&corrupt_id), Err(Error::Corrupt { .. })));
        let page = j.query(&Filter::default(), 10, 0).unwrap();
        assert_eq!(page.records, vec![good]);
        let fixed = ActivityRecord {
            id: corrupt_id.clone(),
            ..rec_at(1, "s", "t", "read", Status::Error)
        };
        j.upsert(fixed.clone()).await.unwrap();
        assert_eq!(j.get(&corrupt_id).unwrap(), Some(fixed));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn group_commit_under_concurrency() {
        let (_dir, j) = open_temp(JournalOptions::default());
        let mut tasks = Vec::new();
        for t in 0..64 {
            let j = j.clone();
            tasks.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..50 {
                    let rec = ActivityRecord::new(
                        RecordType::ToolCall,
                        Source::Mcp,
                        format!("server{}", t % 4),
                        format!("tool{i}"),
                    );
                    ids.push(rec.id.clone());
                    j.append(rec).await.unwrap();
                }
                ids
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        assert_eq!(all.len(), 3200);
        assert_eq!(j.len().unwrap(), 3200);
        for id in &all {
            assert!(j.get(id).unwrap().is_some(), "{id} missing");
        }
        let server0 = Filter {
            server: Some("server0".into()),
            ..Filter::default()
        };
        let page = j.query(&server0, 1000, 0).unwrap();
        assert_eq!(page.records.len(), 800);
        assert!(!page.has_more);
        check_indexes(&j);
    }

    #[tokio::test]
    async fn async_mode_commits_in_background_and_on_flush() {
        let options = JournalOptions {
            durability: Durability::Async {
                flush: Duration::from_millis(20),
            },
            ..JournalOptions::default()
        };
        let (dir, j) = open_temp(options.clone());
        let path = j.path().to_path_buf();
        let mut ids = Vec::new();
        for i in 0..500 {
            let rec = rec_at(
                now_ms(),
                "s",
                &format!("t{}", i % 7),
                "write",
                Status::Success,
            );
            ids.push(rec.id.clone());
            j.append(rec).await.unwrap();
        }
        j.flush().await.unwrap();
        assert_eq!(j.len().unwrap(), 500);
        // Background commits make later appends visible without a flush.
        let late = rec_at(now_ms(), "s", "late", "read", Status::Success);
        j.append(late.clone()).await.unwrap();
        let mut seen = false;
        for _ in 0..200 {
            if j.get(&late.id).unwrap().is_some() {
                seen = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(seen, "async record never committed");
        drop(j);
        let j = Journal::open(&path, options).unwrap();
        assert_eq!(j.len().unwrap(), 501);
        for id in &ids {
            assert!(j.get(id).unwrap().is_some());
        }
        check_indexes(&j);
        drop(dir);
    }

    #[tokio::test]
    async fn close_interrupted_closes_each_pending_record_once_in_async_mode() {
        let options = JournalOptions {
            durability: Durability::Async {
                flush: Duration::from_secs(3600),
            },
            ..JournalOptions::default()
        };
        let (_dir, j) = open_temp(options);
        for i in 0..2500u64 {
            let status = if i % 5 == 0 {
                Status::Success
            } else {
                Status::Pending
            };
            j.append(rec_at(now_ms() + i, "s", "t", "write", status))
                .await
                .unwrap();
        }
        j.flush().await.unwrap();
        // 2,000 pending over three pages; each is closed once even though async upserts
        // are acknowledged before they are committed.
        assert_eq!(j.close_interrupted().await.unwrap(), 2000);
        let pending = super::super::Filter {
            status: Some("pending".to_owned()),
            ..super::super::Filter::default()
        };
        assert!(j.query(&pending, 10, 0).unwrap().records.is_empty());
        let errors = super::super::Filter {
            status: Some("error".to_owned()),
            ..super::super::Filter::default()
        };
        let page = j.query(&errors, 10, 0).unwrap();
        assert!(
            page.records[0]
                .error_message
                .as_deref()
                .unwrap()
                .contains("stopped before")
        );
        assert_eq!(j.len().unwrap(), 2500);
        assert_eq!(j.close_interrupted().await.unwrap(), 0);
        check_indexes(&j);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_mode_bounds_the_queue_and_loses_nothing() {
        let options = JournalOptions {
            durability: Durability::Async {
                flush: Duration::from_secs(3600),
            },
            ..JournalOptions::default()
        };
        let (_dir, j) = open_temp(options);
        let mut tasks = Vec::new();
        for t in 0..64 {
            let j = j.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..400 {
                    let tool = format!("t{i}");
                    j.append(rec_at(
                        now_ms(),
                        &format!("s{t}"),
                        &tool,
                        "read",
                        Status::Success,
                    ))
                    .await
                    .unwrap();
                    assert!(j.slots.available_permits() <= MAX_QUEUED);
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        j.flush().await.unwrap();
        assert_eq!(j.len().unwrap(), 64 * 400);
        assert_eq!(
            j.slots.available_permits(),
            MAX_QUEUED,
            "every slot released"
        );
    }

    #[tokio::test]
    async fn reopen_after_drop_keeps_everything() {
        let (_dir, j) = open_temp(JournalOptions::default());
        let path = j.path().to_path_buf();
        let recs: Vec<_> = (0..100)
            .map(|i| rec_at(1_700_000_000_000 + i, "s", "t", "read", Status::Success))
            .collect();
        for rec in &recs {
            j.append(rec.clone()).await.unwrap();
        }
        drop(j);
        let j = Journal::open(&path, JournalOptions::default()).unwrap();
        assert_eq!(j.len().unwrap(), 100);
        let page = j.query(&Filter::default(), 1000, 0).unwrap();
        let want: Vec<_> = recs.iter().rev().cloned().collect();
        assert_eq!(page.records, want);
        // Still writable after reopening.
        j.append(rec_at(now_ms(), "s", "t", "read", Status::Success))
            .await
            .unwrap();
        assert_eq!(j.len().unwrap(), 101);
    }

    const CRASH_DB: &str = "MCPPROXY_ACTIVITY_CRASH_DB";
    const CRASH_MODE: &str = "MCPPROXY_ACTIVITY_CRASH_MODE";

    /// Child side of the crash tests: appends until killed, printing `ACK <id>` per acked
    /// (Sync) or flushed (Async) record. Does nothing unless run by `crash_*` below.
    #[test]
    #[ignore = "child process of the crash tests"]
    fn crash_child_writer() {
        let Ok(path) = std::env::var(CRASH_DB) else {
            return;
        };
        let sync = std::env::var(CRASH_MODE).as_deref() != Ok("async");
        let durability = if sync {
            Durability::Sync
        } else {
            Durability::Async {
                flush: Duration::from_secs(3600),
            }
        };
        let options = JournalOptions {
            durability,
            ..JournalOptions::default()
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let j = Journal::open(Path::new(&path), options).unwrap();
            if !sync {
                let mut ids = Vec::new();
                for i in 0..500 {
                    let rec = rec_at(now_ms(), "s", &format!("t{i}"), "write", Status::Success);
                    ids.push(rec.id.clone());
                    j.append(rec).await.unwrap();
                }
                j.flush().await.unwrap();
                for id in ids {
                    println!("ACK {id}");
                }
            }
            // Keep writing (Sync: acked and printed; Async: never flushed) until killed.
            let mut tasks = Vec::new();
            for t in 0..8 {
                let j = j.clone();
                tasks.push(tokio::spawn(async move {
                    for i in 0..100_000 {
                        let mut rec = rec_at(
                            now_ms(),
                            &format!("s{t}"),
                            &format!("t{i}"),
                            "read",
                            Status::Success,
                        );
                        rec.arguments = Some(serde_json::json!({"pad": "x".repeat(200)}));
                        let id = rec.id.clone();
                        j.append(rec).await.unwrap();
                        if sync {
                            println!("ACK {id}");
                        }
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
        });
    }

    /// Runs the child writer, kills it with SIGKILL after `after` acks (Sync) or once it
    /// printed its flushed ids (Async), then checks every acked id survived.
    fn crash_round(mode: &str, after: usize) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crash.redb");
        let exe = std::env::current_exe().unwrap();
        let mut child = Process::new(exe)
            .args([
                "--ignored",
                "--exact",
                "activity::journal::tests::crash_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DB, &path)
            .env(CRASH_MODE, mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut acked = Vec::new();
        let mut killed = false;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            // libtest may print "test NAME ... " on the same line as the first output.
            if let Some(at) = line.find("ACK ") {
                acked.push(line[at + 4..].trim().to_string());
            }
            if !killed && acked.len() >= after {
                child.kill().unwrap(); // SIGKILL; keep reading what it printed before dying
                killed = true;
            }
        }
        let status = child.wait().unwrap();
        assert!(
            killed,
            "child exited ({status}) after only {} acks",
            acked.len()
        );
        let j = Journal::open(&path, JournalOptions::default()).unwrap();
        let missing: Vec<_> = acked
            .iter()
            .filter(|id| j.get(id).unwrap().is_none())
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "{} of {} acked ids lost: {missing:?}",
            missing.len(),
            acked.len()
        );
        check_indexes(&j);
    }

    #[test]
    fn crash_loses_no_acked_record_sync() {
        crash_round("sync", 400);
    }

    #[test]
    fn crash_loses_no_flushed_record_async() {
        crash_round("async", 500);
    }
}
