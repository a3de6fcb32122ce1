//! The journal's writer thread: the queued commands, group commit of everything queued into
//! one transaction (each record once, as its latest put; falling back to one record per
//! transaction on failure), the short linger and the `Immediate` syncs of Async mode, and the
//! transaction helpers that apply puts; in Sync mode, the write-ahead log's appends,
//! checkpoints and replay.
//!
//! Every transaction runs under [`guard`]: if one finds the file damaged, the writer answers
//! that write and every later one with [`Error::Damaged`] and no longer touches the file.
//!
//! A write the disk refuses (a full disk, an I/O error) puts the writer in the *failing*
//! state (see `recovery`): the journal's health says why, records somebody waits for are
//! refused, the rest are kept in memory, and the writer retries with backoff, re-opening
//! redb (which refuses everything after an I/O error until it is re-opened) and the
//! write-ahead log, until a write works again.

mod recovery;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use redb::{Database, ReadableTable, WriteTransaction};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::database::{DbSlot, guard};
use super::health::Health;
use super::schema::{
    DATA_BYTES, IDX_STATUS, IndexKeys, META, RECORDS, index_keys, key_id, open_indexes, parse_key,
    row_cost,
};
use super::storage::WriteFaults;
use super::wal::{self, WriteAheadLog};
use super::{Durability, MAX_BATCH};
use crate::outbox;
use crate::record::{ActivityRecord, Status};
use crate::{Error, Result};

type Ack = oneshot::Sender<std::result::Result<(), String>>;
/// The answer to a checkpoint, which blocking code (retention) waits for.
pub(super) type BlockingAck = std::sync::mpsc::Sender<std::result::Result<(), String>>;

/// A record ready for the writer.
pub(super) struct Put {
    pub(super) key: [u8; 16],
    pub(super) json: Vec<u8>,
    pub(super) keys: IndexKeys,
    pub(super) ack: Option<Ack>,
    /// A queue slot, released when the writer is done with the record.
    pub(super) slot: Option<OwnedSemaphorePermit>,
    /// With the log: the writer's number for a put somebody waited for (0: nobody did), so
    /// a batch that fails can tell its own refused records from those acknowledged before.
    seq: u64,
}

impl Put {
    /// Serializes `record`, bounded ([`ActivityRecord::bounded`]) and, with `summarise`,
    /// summarised ([`ActivityRecord::summarised`]), and computes its key and index keys.
    pub(super) fn new(record: &ActivityRecord, summarise: bool) -> Result<Self> {
        let bounded = record.bounded();
        let summary = summarise.then(|| bounded.summarised());
        let record = summary.as_ref().unwrap_or(bounded.as_ref());
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
            seq: 0,
        })
    }

    /// The put to keep in memory: its waiter (if any) told `result`, its queue slot freed.
    fn settled(mut self, result: &Result<()>) -> Self {
        if let Some(ack) = self.ack.take() {
            let _ = ack.send(reply(result));
        }
        self.slot = None;
        self
    }

    /// A put of a row as stored (a write-ahead log entry), already bounded.
    fn from_stored(json: Vec<u8>) -> Result<Self> {
        let record: ActivityRecord =
            serde_json::from_slice(&json).map_err(|source| Error::Corrupt {
                id: "in the write-ahead log".to_owned(),
                source,
            })?;
        Ok(Self {
            key: parse_key(&record.id)?,
            keys: index_keys(&record),
            json,
            ack: None,
            slot: None,
            seq: 0,
        })
    }
}

/// A record nobody waits for, which the writer encodes into a [`Put`] as it takes it: the
/// encoding's CPU is the writer's, not that of the thread that answers the call.
pub(super) struct Unencoded {
    pub(super) record: Box<ActivityRecord>,
    /// Store it summarised (the journal was under pressure when it was sent).
    pub(super) summarise: bool,
    pub(super) slot: Option<OwnedSemaphorePermit>,
}

impl Unencoded {
    /// The put, or the record's id and why it cannot be encoded.
    fn encode(self) -> std::result::Result<Put, (String, Error)> {
        match Put::new(&self.record, self.summarise) {
            Ok(mut put) => {
                put.slot = self.slot;
                Ok(put)
            }
            Err(e) => Err((self.record.id, e)),
        }
    }
}

pub(super) enum Command {
    Put(Put),
    /// A put the writer encodes first.
    Record(Unencoded),
    /// Answered once everything queued before it is durable.
    Flush(Ack),
    /// Answered once everything queued before it is in the redb file with an `Immediate`
    /// commit and the write-ahead log (if any) has started over.
    Checkpoint(BlockingAck),
    /// A reader waits to see everything queued before it (see [`Applied`]): apply it now.
    Apply,
    /// Another thread's transaction (retention, a sink's cursor) found the disk failing.
    Failed(Failure),
}

/// A failure of the disk under the journal, as opposed to one record's (see [`Failure::of`]).
#[derive(Debug, Clone)]
pub(super) struct Failure {
    /// What operators are told: the OS's description of the error.
    pub(super) reason: String,
    /// redb met the error: it refuses everything until it is closed and re-opened.
    pub(super) reopen: bool,
}

impl Failure {
    /// The failure behind `e`, when `e` is the disk's (an I/O error, or redb refusing to go
    /// on after one) and not one record's (an id, an encoding).
    pub(super) fn of(e: &Error) -> Option<Self> {
        let redb = |reason: String| {
            Some(Self {
                reason,
                reopen: true,
            })
        };
        match e {
            Error::Storage(redb::Error::Io(io)) => redb(super::storage::describe(io)),
            Error::Storage(e @ (redb::Error::PreviousIo | redb::Error::TransactionPoisoned)) => {
                redb(e.to_string())
            }
            Error::Io { source, .. } => Some(Self {
                reason: super::storage::describe(source),
                reopen: false,
            }),
            _ => None,
        }
    }
}

/// How many of the puts sent to the writer it has applied to the redb file, so a read can
/// wait to see the writes made before it. With the write-ahead log, sync mode acknowledges
/// a record once the log holds it and applies records to redb a moment later, in batches.
///
/// Puts are counted as they are sent (before the send) and as they are applied. The writer
/// takes puts in send order, so once it has applied as many as had been counted when a read
/// began, it has applied every put whose send finished before the read.
#[derive(Debug, Default)]
pub(super) struct Applied {
    sent: AtomicU64,
    done: Mutex<u64>,
    changed: Condvar,
}

impl Applied {
    /// Counts a put about to be sent.
    pub(super) fn sending(&self) {
        self.sent.fetch_add(1, Ordering::SeqCst);
    }

    /// The puts sent so far, and whether the writer has applied that many.
    pub(super) fn caught_up(&self) -> (u64, bool) {
        let sent = self.sent.load(Ordering::SeqCst);
        (sent, self.done() >= sent)
    }

    /// The count of applied puts (a panic elsewhere cannot leave a `u64` half-written).
    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn done(&self) -> u64 {
        *self.lock()
    }

    /// Waits until `target` puts are applied, at most `timeout`; whether they are.
    pub(super) fn wait_for(&self, target: u64, timeout: Duration) -> bool {
        let done = self.lock();
        let (done, _) = self
            .changed
            .wait_timeout_while(done, timeout, |done| *done < target)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *done >= target
    }

    /// Counts `n` puts as applied (written, or failed for good) and wakes waiting readers.
    fn advance(&self, n: usize) {
        if n == 0 {
            return;
        }
        *self.lock() += n as u64;
        self.changed.notify_all();
    }
}

/// Writes `puts` into `txn`: replaces rows, moves index entries, keeps the size counter,
/// and (with `outbox`) queues each finished record for the sinks.
pub(super) fn apply_puts(txn: &WriteTransaction, puts: &[&Put], outbox: bool) -> Result<()> {
    let mut records = txn.open_table(RECORDS)?;
    let mut indexes = open_indexes(txn)?;
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
pub(super) fn commit_puts(
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

/// What a waiting caller is told of `result`.
fn reply(result: &Result<()>) -> std::result::Result<(), String> {
    result.as_ref().map(|_| ()).map_err(|e| match e {
        // Already a write failure's text: do not prefix it twice.
        Error::Write(text) => text.clone(),
        e => e.to_string(),
    })
}

fn ack(put: Put, result: &Result<()>) {
    match (put.ack, result) {
        (Some(ack), result) => {
            let _ = ack.send(reply(result));
        }
        (None, Err(e)) => {
            tracing::error!(id = %key_id(&put.key), "activity record was not written: {e}");
        }
        (None, Ok(())) => {}
    }
}

/// Lowers the calling thread's scheduling priority (nice 10), so that on a busy machine the
/// threads serving calls, and the upstreams they wait for, run first. For `durability:
/// async` only: nobody waits for those commits, while with `sync` every allowed call waits.
pub(super) fn yield_to_calls() {
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code, reason = "libc has no safe wrapper for setpriority")]
    // SAFETY: `setpriority` on this thread's own id changes only its nice value.
    unsafe {
        let thread = libc::gettid() as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, thread, 10) != 0 {
            tracing::debug!(
                "cannot lower the journal writer's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// How long the writer lets a batch fill in `Durability::Async` after its first record.
/// Well under any `flush` period; the cost is that a record shows in queries this much later.
pub(super) const ASYNC_LINGER: Duration = Duration::from_millis(2);

/// How long, in `Durability::Sync`, records nobody waits for (a call's outcome, submitted
/// as its answer goes back) may stay unsynced, so that the fsync of a record somebody waits
/// for (the next call's `pending` record) covers them too: under steady calls one fsync per
/// call instead of two. At most this much later on disk than when alone. With the
/// write-ahead log they are committed to redb and written to the log at once, and only
/// their fsync waits; without it they wait to share the next commit.
pub(super) const SYNC_CARRY: Duration = Duration::from_millis(2);

/// How long the writer waits in `Durability::Sync` without writes before it checkpoints a
/// non-empty write-ahead log.
pub(super) const CHECKPOINT_IDLE: Duration = Duration::from_secs(1);

/// The puts to write, in queue order: where a batch holds several puts of one record (a
/// call's `pending` record and its outcome), only the last, which replaces the others.
pub(super) fn latest_per_key(puts: &[Put]) -> Vec<&Put> {
    latest(puts.iter())
}

/// [`latest_per_key`] of puts in queue order, wherever they are.
fn latest<'a, I>(puts: I) -> Vec<&'a Put>
where
    I: DoubleEndedIterator<Item = &'a Put>,
{
    let mut seen = HashSet::new();
    let mut latest: Vec<&Put> = puts.rev().filter(|p| seen.insert(p.key)).collect();
    latest.reverse();
    latest
}

/// The commands the writer takes in one go.
#[derive(Default)]
struct Batch {
    puts: Vec<Put>,
    flushes: Vec<Ack>,
    checkpoints: Vec<BlockingAck>,
    /// A reader asked for everything to be applied.
    apply: bool,
    /// Records that could not be encoded (logged, counted as applied).
    dropped: usize,
    /// Another thread found the disk failing.
    failed: Option<Failure>,
}

impl Batch {
    /// Adds `command` to the batch.
    fn take(&mut self, command: Command) {
        match command {
            Command::Put(put) => self.puts.push(put),
            Command::Record(unencoded) => match unencoded.encode() {
                Ok(put) => self.puts.push(put),
                Err((id, e)) => {
                    tracing::error!(%id, "activity record dropped: {e}");
                    self.dropped += 1;
                }
            },
            Command::Flush(ack) => self.flushes.push(ack),
            Command::Checkpoint(ack) => self.checkpoints.push(ack),
            Command::Apply => self.apply = true,
            Command::Failed(failure) => self.failed = Some(failure),
        }
    }

    /// Adds every command already queued, up to [`MAX_BATCH`] puts.
    fn take_queued(&mut self, rx: &Receiver<Command>) {
        while self.puts.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(command) => self.take(command),
                Err(_) => return,
            }
        }
    }

    /// Whether somebody waits for this batch to be durable: an acknowledged put, a flush, a
    /// checkpoint. (A reader's [`Command::Apply`] asks for it to be readable only.)
    fn awaited(&self) -> bool {
        !self.flushes.is_empty()
            || !self.checkpoints.is_empty()
            || self.puts.iter().any(|put| put.ack.is_some())
    }

    /// In `Durability::Sync` without a log, when nobody waits for the batch: takes more
    /// commands for up to `carry` ([`SYNC_CARRY`] by default), until one that somebody waits
    /// for or a full batch, so they share one commit.
    fn carry_unawaited(&mut self, rx: &Receiver<Command>, carry: Duration) {
        if self.awaited() || self.apply {
            return;
        }
        let deadline = Instant::now() + carry;
        while self.puts.len() < MAX_BATCH {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            let Ok(command) = rx.recv_timeout(left) else {
                return;
            };
            self.take(command);
            if self.awaited() || self.apply {
                // Whatever else is queued already goes along.
                self.take_queued(rx);
                return;
            }
        }
    }

    /// Answers everything in the batch with `message` (the file is damaged).
    fn refuse(self, message: &str, applied: &Applied) {
        applied.advance(self.puts.len());
        for put in self.puts {
            ack(put, &Err(Error::Write(message.to_owned())));
        }
        for done in self.flushes {
            let _ = done.send(Err(message.to_owned()));
        }
        for done in self.checkpoints {
            let _ = done.send(Err(message.to_owned()));
        }
    }
}

/// What became of a batch's puts.
enum Written {
    /// The same for every put.
    All(Result<()>),
    /// Retried one record at a time: each record's outcome.
    Each(HashMap<[u8; 16], Result<()>>),
}

/// A deadline the writer keeps while it waits for commands.
#[derive(Clone, Copy)]
enum Due {
    /// Async mode: fsync the commits made since the oldest unsynced one.
    AsyncSync,
    /// Sync mode with a log: fsync frames nobody has waited for yet.
    LogSync,
    /// Sync mode with a log: the writer has been idle; fold the log into the file.
    Checkpoint,
    /// Sync mode with a log: apply the records acknowledged since the oldest unapplied one.
    Apply,
    /// Writes fail: try again (see `recovery`).
    Recover,
}

/// How long, in sync mode with a log, acknowledged records wait to be applied to redb
/// (unless a read asks for them first), so one transaction holds several calls' records.
/// Against 2 ms, 10 ms took ~80 µs off a call at c=1 on two cores (fewer transactions for
/// the same records, less CPU taken from the calls); 30 ms gained nothing more.
pub(super) const APPLY_LINGER: Duration = Duration::from_millis(10);

/// What the writer thread is told at start.
pub(super) struct WriterSetup {
    pub(super) durability: Durability,
    /// See [`super::JournalOptions::sync_carry`].
    pub(super) sync_carry: Duration,
    /// See [`super::JournalOptions::checkpoint_idle`].
    pub(super) checkpoint_idle: Duration,
    pub(super) on_commit: Option<super::CommitObserver>,
    pub(super) on_fsync: Option<super::FsyncObserver>,
    /// Sync mode's write-ahead log, if it has one.
    pub(super) log: Option<WriteAheadLog>,
    /// Shared with the journal's readers.
    pub(super) applied: Arc<Applied>,
    /// redb's page cache, for a re-open.
    pub(super) cache_bytes: usize,
    /// The log's size, for re-creating it after a failure (0: sync mode has no log).
    pub(super) log_capacity: u64,
    /// See [`super::JournalOptions::write_faults`].
    pub(super) faults: Option<WriteFaults>,
    /// Shared with the journal: `failing` while writes fail.
    pub(super) health: Arc<Health>,
}

/// Most puts the writer keeps in memory while the journal fails (records nobody waited for,
/// and acknowledged records the redb file may lack): past this they are logged as lost.
const MAX_KEPT: usize = super::MAX_QUEUED;

/// The writer thread's state.
struct Writer<'a> {
    /// The database, `None` only while a re-open after a failure has not succeeded.
    db: Option<Arc<Database>>,
    /// Where readers find the database.
    slot: &'a DbSlot,
    path: &'a Path,
    outbox_on: &'a AtomicBool,
    setup: WriterSetup,
    /// Async mode: when the oldest commit not yet fsync'd was made.
    unsynced_since: Option<Instant>,
    /// Async mode: the records committed since the last fsync. redb forgets them if it is
    /// re-opened after an I/O error, so they are kept until an fsync holds them (at most
    /// [`MAX_KEPT`]: past that the writer fsyncs early).
    unsynced: Vec<Put>,
    /// Sync mode with a log: when the oldest frame not yet fsync'd was written.
    log_unsynced_since: Option<Instant>,
    /// When the last batch was written (the idle checkpoint counts from here).
    last_write: Instant,
    /// Sync mode with a log: records in the log (acknowledged) not yet applied to redb.
    unapplied: Vec<Put>,
    /// When the oldest of `unapplied` was acknowledged.
    unapplied_since: Option<Instant>,
    /// Set once a transaction found the file damaged: from then on nothing touches it.
    damaged: Option<String>,
    /// Set while writes fail (see `recovery`).
    failing: Option<recovery::Failing>,
    /// A write-ahead log given up while it may hold records the redb file has not made
    /// durable: removed after the next full commit.
    abandoned_log: Option<PathBuf>,
    /// The next number for a put somebody waits for (see [`Put::seq`]).
    next_seq: u64,
}

pub(super) fn writer_loop(
    db: Arc<Database>,
    slot: &DbSlot,
    path: &Path,
    rx: &Receiver<Command>,
    outbox_on: &AtomicBool,
    setup: WriterSetup,
) {
    let mut writer = Writer {
        db: Some(db),
        slot,
        path,
        outbox_on,
        setup,
        unsynced_since: None,
        unsynced: Vec::new(),
        log_unsynced_since: None,
        last_write: Instant::now(),
        unapplied: Vec::new(),
        unapplied_since: None,
        damaged: None,
        failing: None,
        abandoned_log: None,
        next_seq: 1,
    };
    while let Some(first) = writer.next_command(rx) {
        let async_mode = matches!(writer.setup.durability, Durability::Async { .. });
        if async_mode && matches!(first, Command::Put(_) | Command::Record(_)) {
            // Nobody waits for this commit: let the batch fill for a moment (sends do not wake
            // a sleeping thread), so a busy proxy wakes the writer once per batch, not once
            // per record, and a call's pending and finished records usually commit together.
            std::thread::sleep(ASYNC_LINGER);
        }
        let mut batch = Batch::default();
        batch.take(first);
        batch.take_queued(rx);
        if !async_mode && writer.setup.log.is_none() && !batch.puts.is_empty() {
            batch.carry_unawaited(rx, writer.setup.sync_carry);
        }
        writer.write(batch);
    }
    writer.close();
}

impl Writer<'_> {
    /// The next command, running the syncs and checkpoints that fall due meanwhile; `None`
    /// once the journal is closed.
    fn next_command(&mut self, rx: &Receiver<Command>) -> Option<Command> {
        loop {
            let Some((at, due)) = self.due() else {
                return rx.recv().ok();
            };
            match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(command) => return Some(command),
                Err(RecvTimeoutError::Timeout) => self.run(due),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// The next deadline, if any.
    fn due(&self) -> Option<(Instant, Due)> {
        if self.damaged.is_some() {
            return None;
        }
        if let Some(failing) = &self.failing {
            return Some((failing.retry_at, Due::Recover));
        }
        let setup = &self.setup;
        let candidates = match setup.durability {
            Durability::Async { flush } => [
                self.unsynced_since.map(|t| (t + flush, Due::AsyncSync)),
                None,
                None,
            ],
            Durability::Sync => [
                self.unapplied_since.map(|t| (t + APPLY_LINGER, Due::Apply)),
                self.log_unsynced_since
                    .map(|t| (t + setup.sync_carry, Due::LogSync)),
                setup
                    .log
                    .as_ref()
                    .filter(|log| !log.is_empty())
                    .map(|_| (self.last_write + setup.checkpoint_idle, Due::Checkpoint)),
            ],
        };
        candidates.into_iter().flatten().min_by_key(|(at, _)| *at)
    }

    fn run(&mut self, due: Due) {
        match due {
            Due::AsyncSync => {
                if self.sync_commits().is_err() && self.failing.is_none() {
                    // Retry after another period rather than spin.
                    self.unsynced_since = Some(Instant::now());
                }
            }
            Due::LogSync => {
                let _ = self.sync_log();
            }
            Due::Checkpoint => {
                let _ = self.checkpoint();
                // Failed: retry after another idle period rather than spin.
                self.last_write = Instant::now();
            }
            Due::Apply => {
                let _ = self.apply();
            }
            Due::Recover => self.recover(),
        }
    }

    /// On close: makes everything durable (in sync mode with a log, folded into the file);
    /// while writes fail, one last attempt to write what is kept.
    fn close(&mut self) {
        if self.damaged.is_some() {
            return;
        }
        if self.failing.is_some() {
            self.recover();
            if let Some(failing) = &self.failing {
                tracing::error!(
                    "the activity journal still cannot write ({}) as mcpproxy stops: {} records \
                     it kept in memory are lost (acknowledged records in the write-ahead log \
                     are written back at the next start)",
                    failing.reason,
                    failing.kept.len()
                );
                return;
            }
        }
        let _ = self.apply();
        if self.unsynced_since.is_some() {
            let _ = self.sync_commits();
        }
        if self.setup.log.as_ref().is_some_and(|log| !log.is_empty()) {
            let _ = self.checkpoint();
        }
    }

    /// Runs `f` on the database under [`guard`]. An error that is the disk's puts the writer
    /// in the failing state; one that is damage stops it touching the file.
    fn db_op<T>(&mut self, f: impl FnOnce(&Database) -> Result<T>) -> Result<T> {
        let Some(db) = self.db.clone() else {
            return Err(self.unwritable());
        };
        let result = guard(self.path, || f(&db));
        if let Err(e) = &result {
            self.note_error(e);
        }
        result
    }

    /// Notes what `e` says about the disk (see [`db_op`](Self::db_op)).
    fn note_error(&mut self, e: &Error) {
        if let Error::Damaged { .. } = e {
            if self.damaged.is_none() {
                tracing::error!("activity records cannot be written: {e}");
                self.damaged = Some(e.to_string());
                self.setup.health.fail(&e.to_string());
            }
        } else if let Some(failure) = Failure::of(e) {
            self.fail(failure);
        }
    }

    /// Writes a batch and answers everyone in it.
    fn write(&mut self, mut batch: Batch) {
        self.setup
            .applied
            .advance(std::mem::take(&mut batch.dropped));
        if let Some(message) = &self.damaged {
            batch.refuse(message, &self.setup.applied);
            return;
        }
        if let Some(failure) = batch.failed.take() {
            self.fail(failure);
        }
        if self.failing.is_some() {
            self.refuse_while_failing(batch);
            return;
        }
        if matches!(self.setup.durability, Durability::Sync) && self.setup.log.is_some() {
            self.write_logged(batch);
            self.last_write = Instant::now();
            return;
        }
        let Batch {
            puts,
            flushes,
            checkpoints,
            apply: _,
            dropped: _,
            failed: _,
        } = batch;
        let count = puts.len();
        let mut flush_result = Ok(());
        if !puts.is_empty() {
            let (written, synced) = self.write_puts(&puts, !flushes.is_empty());
            flush_result = synced;
            if self.failing.is_some() {
                // The disk failed under this batch: its records somebody waits for are
                // refused (and removed at the recovery if they reached the file), the others
                // kept.
                self.refuse_failed(puts, flushes, checkpoints, true);
                self.last_write = Instant::now();
                return;
            }
            match written {
                Written::All(result) => {
                    let result = result.map_err(|e| Error::Write(e.to_string()));
                    if let (Err(e), Ok(())) = (&result, &flush_result) {
                        flush_result = Err(Error::Write(e.to_string()));
                    }
                    if result.is_ok() && self.unsynced_since.is_some() {
                        // Committed without an fsync (async mode): kept until one.
                        self.unsynced
                            .extend(puts.into_iter().map(|p| p.settled(&Ok(()))));
                    } else {
                        puts.into_iter().for_each(|put| ack(put, &result));
                    }
                }
                Written::Each(outcomes) => {
                    for put in puts {
                        let result = match outcomes.get(&put.key) {
                            Some(Ok(())) => Ok(()),
                            Some(Err(e)) => Err(Error::Write(e.to_string())),
                            None => Err(Error::Write("the record was not written".into())),
                        };
                        if result.is_ok() && self.unsynced_since.is_some() {
                            self.unsynced.push(put.settled(&result));
                        } else {
                            ack(put, &result);
                        }
                    }
                }
            }
        } else if !flushes.is_empty() && self.damaged.is_none() && self.unsynced_since.is_some() {
            flush_result = self.sync_commits();
        }
        self.setup.applied.advance(count);
        if !checkpoints.is_empty() && self.damaged.is_none() && self.failing.is_none() {
            let result = self.checkpoint();
            if flush_result.is_ok() {
                flush_result = result;
            }
        }
        let answer = reply(&flush_result);
        for done in flushes {
            let _ = done.send(answer.clone());
        }
        for done in checkpoints {
            let _ = done.send(answer.clone());
        }
        self.last_write = Instant::now();
    }

    /// Without a log: commits `puts` (each record once, as its latest put) and makes them as
    /// durable as the mode asks (`flushing`: a flush is in the batch). Returns what became
    /// of them and whether everything before is durable (for flushes).
    fn write_puts(&mut self, puts: &[Put], flushing: bool) -> (Written, Result<()>) {
        let durability = match self.setup.durability {
            Durability::Sync => redb::Durability::Immediate,
            Durability::Async { flush } => {
                if flushing
                    || self.unsynced.len() >= MAX_KEPT
                    || self.unsynced_since.is_some_and(|t| t.elapsed() >= flush)
                {
                    redb::Durability::Immediate
                } else {
                    redb::Durability::None
                }
            }
        };
        let refs = latest_per_key(puts);
        let outbox = self.outbox_on.load(Ordering::SeqCst);
        let started = Instant::now();
        let result = self.db_op(|db| commit_puts(db, &refs, durability, outbox));
        if let (Ok(()), Some(observer)) = (&result, &self.setup.on_commit) {
            (observer.0)(started.elapsed());
        }
        match result {
            Ok(()) => {
                self.committed(durability);
                (Written::All(Ok(())), Ok(()))
            }
            Err(e) if self.damaged.is_some() || self.failing.is_some() => {
                (Written::All(Err(e)), Ok(()))
            }
            Err(e) if refs.len() > 1 => {
                tracing::warn!(
                    "activity group commit of {} records failed ({e}); retrying one by one",
                    refs.len()
                );
                // Each record on its own: its latest put, whose outcome every put of that
                // record in the batch shares.
                let outcomes = self.commit_each(&refs, durability, outbox);
                (
                    Written::Each(outcomes),
                    self.settle_after_failure(durability),
                )
            }
            Err(e) => (Written::All(Err(e)), self.settle_after_failure(durability)),
        }
    }

    /// With the log: writes the batch's records to it, acknowledges them once it is fsync'd
    /// (a batch nobody waits for: at the next fsync, at most [`SYNC_CARRY`] later) and keeps
    /// them to apply to redb in a moment ([`APPLY_LINGER`], or at once when a reader asks).
    /// A batch the log cannot take is applied and made durable by a checkpoint.
    fn write_logged(&mut self, batch: Batch) {
        let awaited = batch.awaited();
        let Batch {
            puts,
            flushes,
            checkpoints,
            apply,
            dropped: _,
            failed: _,
        } = batch;
        let mut acks = Vec::new();
        let mut result = Ok(());
        let first_seq = self.next_seq;
        if !puts.is_empty() {
            let started = Instant::now();
            let in_log = self.write_frames(&latest_per_key(&puts));
            for mut put in puts {
                if let Some(ack) = put.ack.take() {
                    acks.push(ack);
                    put.seq = self.next_seq;
                    self.next_seq += 1;
                }
                self.unapplied.push(put);
            }
            self.unapplied_since.get_or_insert(started);
            result = match (in_log, awaited) {
                (true, true) => self.sync_log(),
                (true, false) => Ok(()),
                (false, _) => self.checkpoint(),
            };
            if let (Ok(()), true, Some(observer)) = (&result, awaited, &self.setup.on_commit) {
                (observer.0)(started.elapsed());
            }
        } else if !flushes.is_empty() && self.log_unsynced_since.is_some() {
            result = self.sync_log();
        }
        if self.failing.is_some() {
            // The disk failed under this batch: its records somebody waits for are refused,
            // so they must not be written later.
            self.refuse_since(first_seq);
        }
        let answer = reply(&result);
        for ack in acks {
            let _ = ack.send(answer.clone());
        }
        if let Err(e) = &result {
            tracing::error!("activity records may not be durable: {e}");
        }
        for done in flushes {
            let _ = done.send(answer.clone());
        }
        if self.failing.is_some() {
            for done in checkpoints {
                let _ = done.send(answer.clone());
            }
            return;
        }
        if apply || self.unapplied.len() >= MAX_BATCH {
            let _ = self.apply();
        }
        if !checkpoints.is_empty() {
            let answer = reply(&self.checkpoint());
            for done in checkpoints {
                let _ = done.send(answer.clone());
            }
        }
    }

    /// Applies the acknowledged records the log holds to redb, in one `Durability::None`
    /// transaction (each record once, as its latest put), and tells waiting readers. A
    /// transaction that fails is retried one record at a time; a record that still fails is
    /// logged (it stays in the log until the next checkpoint). If the disk fails, the
    /// records are kept for the recovery (they are in the log).
    fn apply(&mut self) -> Result<()> {
        if self.unapplied.is_empty() || self.damaged.is_some() || self.failing.is_some() {
            let n = std::mem::take(&mut self.unapplied).len();
            self.setup.applied.advance(n);
            self.unapplied_since = None;
            return Ok(());
        }
        let puts = std::mem::take(&mut self.unapplied);
        self.unapplied_since = None;
        let outbox = self.outbox_on.load(Ordering::SeqCst);
        let none = redb::Durability::None;
        let result = self.db_op(|db| commit_puts(db, &latest_per_key(&puts), none, outbox));
        let count = puts.len();
        let result = match result {
            Ok(()) => {
                if self.setup.log.is_none() {
                    // The log was given up: these are durable only at the next fsync.
                    self.unsynced
                        .extend(puts.into_iter().map(|p| p.settled(&Ok(()))));
                }
                Ok(())
            }
            Err(e) if self.failing.is_some() => {
                // Acknowledged: written by the recovery.
                for put in puts {
                    self.keep(put);
                }
                Err(e)
            }
            Err(e @ Error::Damaged { .. }) => Err(e),
            Err(e) => {
                let refs = latest_per_key(&puts);
                tracing::warn!(
                    "applying {} activity records failed ({e}); retrying one by one",
                    refs.len()
                );
                for (key, result) in self.commit_each(&refs, none, outbox) {
                    if let Err(e) = result {
                        tracing::error!(
                            id = %key_id(&key),
                            "an acknowledged activity record cannot be written to the journal: {e}"
                        );
                    }
                }
                if self.failing.is_some() {
                    for put in puts {
                        self.keep(put);
                    }
                }
                Err(e)
            }
        };
        self.setup.applied.advance(count);
        result
    }

    /// Commits each of `puts` in a transaction of its own (after a group commit failed), so
    /// one bad record does not fail its neighbours; each record's outcome. Stops writing if
    /// the disk fails.
    fn commit_each(
        &mut self,
        puts: &[&Put],
        durability: redb::Durability,
        outbox: bool,
    ) -> HashMap<[u8; 16], Result<()>> {
        let mut outcomes = HashMap::with_capacity(puts.len());
        for put in puts {
            let result = if self.failing.is_some() || self.damaged.is_some() {
                Err(self.unwritable())
            } else {
                self.db_op(|db| commit_puts(db, &[put], durability, outbox))
            };
            if result.is_ok() {
                self.committed(durability);
            }
            outcomes.insert(put.key, result);
        }
        outcomes
    }

    /// Tells the observer of an fsync.
    fn fsynced(&self) {
        if let Some(observer) = &self.setup.on_fsync {
            (observer.0)();
        }
    }

    /// Notes a successful commit (an `Immediate` one is an fsync; a `None` one without a log
    /// opens Async mode's unsynced window).
    fn committed(&mut self, durability: redb::Durability) {
        if matches!(durability, redb::Durability::Immediate) {
            self.fsynced();
            self.synced();
        } else if self.setup.log.is_none() {
            self.unsynced_since.get_or_insert_with(Instant::now);
        }
    }

    /// Everything committed so far is durable: the records kept until then go, and so does
    /// an abandoned log whose records the file now holds.
    fn synced(&mut self) {
        self.unsynced_since = None;
        self.unsynced.clear();
        if self.unapplied.is_empty()
            && let Some(path) = self.abandoned_log.take()
        {
            remove_abandoned_log(&path);
        }
    }

    /// After a failed batch: makes what did commit durable as the batch would have.
    fn settle_after_failure(&mut self, durability: redb::Durability) -> Result<()> {
        if matches!(durability, redb::Durability::Immediate) {
            self.sync_commits()
        } else {
            Ok(())
        }
    }

    /// An empty `Immediate` commit: persists every `None` commit before it.
    fn sync_commits(&mut self) -> Result<()> {
        match self.db_op(sync) {
            Ok(()) => {
                self.fsynced();
                self.synced();
                Ok(())
            }
            Err(e) => {
                tracing::error!("activity journal fsync failed: {e}");
                Err(e)
            }
        }
    }

    /// Writes `puts`' frames to the log (no fsync yet); whether it did. A batch the log
    /// cannot take is left to the caller's checkpoint; a log that fails to write is given up
    /// (the journal goes on with `Immediate` commits).
    fn write_frames(&mut self, puts: &[&Put]) -> bool {
        let Some(wal) = self.setup.log.as_mut() else {
            return false;
        };
        let bytes = puts.iter().map(|p| wal::frame_len(p.json.len())).sum();
        if !wal.fits(bytes) {
            return false;
        }
        match wal.write(puts.iter().map(|p| p.json.as_slice())) {
            Ok(()) => {
                self.log_unsynced_since.get_or_insert_with(Instant::now);
                true
            }
            Err(e) => {
                self.give_up_log(&e);
                false
            }
        }
    }

    /// Fsyncs the log's unsynced frames (waiting for an fsync already started). If that
    /// fails, the log is given up and an `Immediate` commit makes the records durable.
    fn sync_log(&mut self) -> Result<()> {
        let Some(wal) = self.setup.log.as_mut() else {
            return self.sync_commits();
        };
        match wal.sync() {
            Ok(()) => {
                self.fsynced();
                self.log_unsynced_since = None;
                Ok(())
            }
            Err(e) => {
                self.give_up_log(&e);
                self.apply()?;
                self.sync_commits()
            }
        }
    }

    /// An `Immediate` commit (persisting every `None` commit before it), then the log, whose
    /// records that commit holds, starts over.
    fn checkpoint(&mut self) -> Result<()> {
        if self.failing.is_some() {
            return Err(self.unwritable());
        }
        self.apply()?;
        self.sync_commits().inspect_err(|e| {
            tracing::error!("activity journal checkpoint failed: {e}");
        })?;
        self.log_unsynced_since = None;
        match self.setup.log.as_mut().map(WriteAheadLog::start_over) {
            Some(Ok(())) => self.fsynced(),
            Some(Err(e)) => {
                self.give_up_log(&e);
                // Everything it held is durable in the file: it goes now.
                self.synced();
            }
            None => {}
        }
        Ok(())
    }

    /// Stops using the log. The journal goes on with `Immediate` commits; the caller makes
    /// what only the log held durable, and the file is removed once a full commit has (its
    /// frames must not be replayed over newer rows at a later start, nor lost before).
    fn give_up_log(&mut self, e: &std::io::Error) {
        self.log_unsynced_since = None;
        let Some(wal) = self.setup.log.take() else {
            return;
        };
        tracing::error!(
            log = %wal.path().display(),
            "the activity write-ahead log cannot be written ({e}); committing records \
             straight to the journal file from now on"
        );
        self.abandoned_log = Some(wal.path().to_path_buf());
    }
}

/// Removes a write-ahead log given up once the redb file holds all it held.
fn remove_abandoned_log(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::error!(
            log = %path.display(),
            "cannot remove the abandoned activity write-ahead log ({e}); remove it before \
             the next start, or it may restore older versions of the newest records"
        );
    }
}

/// Replays the payloads of a write-ahead log into `db` (one `Immediate` commit): for each
/// record its last payload, written only where the stored row differs, so a record the file
/// already holds is neither rewritten nor queued for the sinks again. A payload that is not
/// a record is skipped with a warning. Returns how many records it wrote.
pub(super) fn replay(db: &Database, payloads: Vec<Vec<u8>>, outbox: bool) -> Result<usize> {
    let puts = stored_puts(payloads);
    if puts.is_empty() {
        return Ok(0);
    }
    write_missing(db, &latest_per_key(&puts), &[], outbox)
}

/// The puts of a write-ahead log's payloads; one that is not a record is skipped with a
/// warning.
fn stored_puts(payloads: Vec<Vec<u8>>) -> Vec<Put> {
    payloads
        .into_iter()
        .filter_map(|json| {
            Put::from_stored(json)
                .inspect_err(|e| {
                    tracing::warn!("skipping an unreadable write-ahead log entry: {e}")
                })
                .ok()
        })
        .collect()
}

/// In one `Immediate` transaction: writes each of `puts` (latest per key) whose row differs
/// from the stored one (so nothing the file holds is queued for the sinks twice), and
/// removes the rows of `refused` (records somebody waited for that were refused) where the
/// file holds exactly them. Returns how many records it wrote.
pub(super) fn write_missing(
    db: &Database,
    puts: &[&Put],
    refused: &[&Put],
    outbox: bool,
) -> Result<usize> {
    let mut txn = db.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    let changed: Vec<&Put> = {
        let records = txn.open_table(RECORDS)?;
        let mut changed = Vec::new();
        for put in puts {
            if records
                .get(put.key)?
                .is_none_or(|row| row.value() != put.json.as_slice())
            {
                changed.push(*put);
            }
        }
        changed
    };
    apply_puts(&txn, &changed, outbox)?;
    remove_refused(&txn, refused)?;
    txn.commit()?;
    Ok(changed.len())
}

/// Removes the rows that are exactly one of `refused`, with their index entries.
fn remove_refused(txn: &WriteTransaction, refused: &[&Put]) -> Result<()> {
    if refused.is_empty() {
        return Ok(());
    }
    let mut records = txn.open_table(RECORDS)?;
    let mut indexes = open_indexes(txn)?;
    let mut meta = txn.open_table(META)?;
    let mut bytes = meta.get(DATA_BYTES)?.map_or(0, |g| g.value());
    for put in refused {
        let stored = records
            .get(put.key)?
            .is_some_and(|row| row.value() == put.json.as_slice());
        if !stored {
            continue;
        }
        records.remove(put.key)?;
        for (index, key) in indexes.iter_mut().zip(&put.keys) {
            if let Some(k) = key {
                index.remove((k.as_str(), put.key))?;
            }
        }
        bytes = bytes.saturating_sub(row_cost(put.json.len(), &put.keys));
    }
    meta.insert(DATA_BYTES, bytes)?;
    Ok(())
}
