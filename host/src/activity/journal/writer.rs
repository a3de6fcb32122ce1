//! The journal's writer thread: the queued commands, group commit of everything queued into
//! one transaction (each record once, as its latest put; falling back to one record per
//! transaction on failure), the short linger and the `Immediate` syncs of Async mode, and the
//! transaction helpers that apply puts; in Sync mode, the write-ahead log's appends,
//! checkpoints and replay.
//!
//! Every transaction runs under [`guard`]: if one finds the file damaged, the writer answers
//! that write and every later one with [`Error::Damaged`] and no longer touches the file.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use redb::{Database, ReadableTable, WriteTransaction};
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::schema::{
    DATA_BYTES, IDX_STATUS, INDEXES, IndexKeys, META, N_INDEXES, RECORDS, index_keys, key_id,
    parse_key, row_cost,
};
use super::wal::{self, WriteAheadLog};
use super::{Durability, MAX_BATCH, guard};
use crate::activity::outbox;
use crate::activity::record::{ActivityRecord, Status};
use crate::activity::{Error, Result};

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
        })
    }
}

impl Put {
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
        })
    }
}

pub(super) enum Command {
    Put(Put),
    /// Answered once everything queued before it is durable.
    Flush(Ack),
    /// Answered once everything queued before it is in the redb file with an `Immediate`
    /// commit and the write-ahead log (if any) has started over.
    Checkpoint(BlockingAck),
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

fn ack(put: Put, result: &Result<()>) {
    match (put.ack, result) {
        (Some(ack), result) => {
            let _ = ack.send(result.as_ref().map(|_| ()).map_err(|e| match e {
                // Already a write failure's text: do not prefix it twice.
                Error::Write(text) => text.clone(),
                e => e.to_string(),
            }));
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
/// as its answer goes back) wait for a record somebody does (the next call's `pending`
/// record) to share its commit. Each commit costs an fsync of every page it touches; under
/// steady calls this makes one commit per call instead of two. At most this much later on
/// disk than when alone.
pub(super) const SYNC_CARRY: Duration = Duration::from_millis(2);

/// How long the writer waits in `Durability::Sync` without writes before it checkpoints a
/// non-empty write-ahead log.
pub(super) const CHECKPOINT_IDLE: Duration = Duration::from_secs(1);

/// In `Durability::Sync`, when the batch holds only records nobody waits for: takes more
/// commands for up to `carry` ([`SYNC_CARRY`] by default), until one that somebody waits
/// for (an acknowledged put, a flush) or a full batch.
fn carry_unawaited(
    rx: &Receiver<Command>,
    carry: Duration,
    puts: &mut Vec<Put>,
    flushes: &mut Vec<Ack>,
    checkpoints: &mut Vec<BlockingAck>,
) {
    if !flushes.is_empty() || !checkpoints.is_empty() || puts.iter().any(|put| put.ack.is_some()) {
        return;
    }
    let deadline = Instant::now() + carry;
    while puts.len() < MAX_BATCH {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return;
        };
        let Ok(command) = rx.recv_timeout(left) else {
            return;
        };
        let awaited = match &command {
            Command::Put(put) => put.ack.is_some(),
            Command::Flush(_) | Command::Checkpoint(_) => true,
        };
        take(command, puts, flushes, checkpoints);
        if awaited {
            // Whatever else is queued already goes along.
            take_queued(rx, puts, flushes, checkpoints);
            return;
        }
    }
}

/// Adds `command` to the batch being gathered.
fn take(
    command: Command,
    puts: &mut Vec<Put>,
    flushes: &mut Vec<Ack>,
    checkpoints: &mut Vec<BlockingAck>,
) {
    match command {
        Command::Put(put) => puts.push(put),
        Command::Flush(ack) => flushes.push(ack),
        Command::Checkpoint(ack) => checkpoints.push(ack),
    }
}

/// Adds every command already queued to the batch, up to [`MAX_BATCH`] puts.
fn take_queued(
    rx: &Receiver<Command>,
    puts: &mut Vec<Put>,
    flushes: &mut Vec<Ack>,
    checkpoints: &mut Vec<BlockingAck>,
) {
    while puts.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(command) => take(command, puts, flushes, checkpoints),
            Err(_) => return,
        }
    }
}

/// The puts to write, in queue order: where a batch holds several puts of one record (a
/// call's `pending` record and its outcome), only the last, which replaces the others.
pub(super) fn latest_per_key(puts: &[Put]) -> Vec<&Put> {
    let mut seen = HashSet::with_capacity(puts.len());
    let mut latest: Vec<&Put> = puts.iter().rev().filter(|p| seen.insert(p.key)).collect();
    latest.reverse();
    latest
}

/// What the writer thread is told at start.
pub(super) struct WriterSetup {
    pub(super) durability: Durability,
    /// See [`super::JournalOptions::sync_carry`].
    pub(super) sync_carry: Duration,
    /// See [`super::JournalOptions::checkpoint_idle`].
    pub(super) checkpoint_idle: Duration,
    pub(super) on_commit: Option<super::CommitObserver>,
    /// Sync mode's write-ahead log, if it has one.
    pub(super) log: Option<WriteAheadLog>,
}

pub(super) fn writer_loop(
    db: &Database,
    path: &Path,
    rx: &Receiver<Command>,
    outbox_on: &AtomicBool,
    setup: WriterSetup,
) {
    let WriterSetup {
        durability,
        sync_carry,
        checkpoint_idle,
        on_commit,
        mut log,
    } = setup;
    let flush_every = match durability {
        Durability::Sync => None,
        Durability::Async { flush } => Some(flush),
    };
    // Async mode: when the oldest not-yet-fsync'd commit happened.
    let mut unsynced_since: Option<Instant> = None;
    // Set once a transaction found the file damaged: from then on nothing touches it.
    let mut damaged: Option<String> = None;
    let sync_or_log = |unsynced: &mut Option<Instant>| match guard(path, || sync(db)) {
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
        let pending_log = log.as_ref().is_some_and(|l| !l.is_empty()) && damaged.is_none();
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
            _ if pending_log => match rx.recv_timeout(checkpoint_idle) {
                Ok(command) => command,
                Err(RecvTimeoutError::Timeout) => {
                    // Idle: fold the log into the file, so it is whole on disk by itself.
                    let _ = checkpoint(db, path, &mut log);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = checkpoint(db, path, &mut log);
                    return;
                }
            },
            _ => match rx.recv() {
                Ok(command) => command,
                Err(_) => return,
            },
        };
        if flush_every.is_some() && matches!(first, Command::Put(_)) {
            // Nobody waits for this commit: let the batch fill for a moment (sends do not wake
            // a sleeping thread), so a busy proxy wakes the writer once per batch, not once
            // per record, and a call's pending and finished records usually commit together.
            std::thread::sleep(ASYNC_LINGER);
        }
        let mut puts = Vec::new();
        let mut flushes = Vec::new();
        let mut checkpoints = Vec::new();
        take(first, &mut puts, &mut flushes, &mut checkpoints);
        take_queued(rx, &mut puts, &mut flushes, &mut checkpoints);
        if flush_every.is_none() && !puts.is_empty() {
            carry_unawaited(rx, sync_carry, &mut puts, &mut flushes, &mut checkpoints);
        }
        if let Some(message) = &damaged {
            for put in puts {
                ack(put, &Err(Error::Write(message.clone())));
            }
            for done in flushes {
                let _ = done.send(Err(message.clone()));
            }
            for done in checkpoints {
                let _ = done.send(Err(message.clone()));
            }
            continue;
        }
        let immediate = match flush_every {
            None => true,
            Some(flush) => {
                !flushes.is_empty() || unsynced_since.is_some_and(|t| t.elapsed() >= flush)
            }
        };
        // Sync mode with a log: commit without an fsync, then make the batch durable in the
        // log (see `wal`).
        let logged = immediate && flush_every.is_none() && log.is_some();
        let mut flush_result = Ok(());
        if !puts.is_empty() {
            let durability = if immediate && !logged {
                redb::Durability::Immediate
            } else {
                redb::Durability::None
            };
            let refs = latest_per_key(&puts);
            let outbox = outbox_on.load(Ordering::SeqCst);
            let started = Instant::now();
            // With a log, the batch's fsync there runs while redb commits it.
            let in_log = logged && start_log_append(&mut log, &refs);
            let committed = guard(path, || commit_puts(db, &refs, durability, outbox));
            let result = match (committed, logged) {
                (Ok(()), true) => finish_log_append(db, path, &mut log, in_log),
                (Err(e), true) => {
                    if in_log && let Some(Err(sync)) = log.as_mut().map(|l| l.finish_append()) {
                        tracing::error!("the activity write-ahead log cannot be synced: {sync}");
                        abandon(&mut log);
                    }
                    Err(e)
                }
                (result, false) => result,
            };
            if let (Ok(()), Some(observer)) = (&result, &on_commit) {
                (observer.0)(started.elapsed());
            }
            match result {
                Err(e @ Error::Damaged { .. }) => {
                    tracing::error!("activity records cannot be written: {e}");
                    let message = e.to_string();
                    for put in puts {
                        ack(put, &Err(Error::Write(message.clone())));
                    }
                    flush_result = Err(e);
                    damaged = Some(message);
                }
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
                    // Each record on its own: its latest put, whose outcome every put of
                    // that record in the batch shares. With a log, each is committed
                    // `Immediate` and the log then starts over (below), so it never holds a
                    // record older than the file's.
                    let durability = match logged {
                        true => redb::Durability::Immediate,
                        false => durability,
                    };
                    let mut outcomes: HashMap<[u8; 16], Result<()>> = HashMap::new();
                    for put in latest_per_key(&puts) {
                        let result = guard(path, || commit_puts(db, &[put], durability, outbox));
                        if result.is_ok() && !immediate {
                            unsynced_since.get_or_insert_with(Instant::now);
                        }
                        outcomes.insert(put.key, result);
                    }
                    for put in puts {
                        let result = match outcomes.get(&put.key) {
                            Some(Ok(())) => Ok(()),
                            Some(Err(e)) => Err(Error::Write(e.to_string())),
                            None => Err(Error::Write("the record was not written".into())),
                        };
                        ack(put, &result);
                    }
                    if logged {
                        flush_result = checkpoint(db, path, &mut log);
                    } else if immediate {
                        flush_result = sync_or_log(&mut unsynced_since);
                    }
                }
                Err(e) => {
                    puts.into_iter()
                        .for_each(|put| ack(put, &Err(Error::Write(e.to_string()))));
                    if logged {
                        flush_result = checkpoint(db, path, &mut log);
                    } else if immediate {
                        flush_result = sync_or_log(&mut unsynced_since);
                    }
                }
            }
        } else if immediate && unsynced_since.is_some() {
            flush_result = sync_or_log(&mut unsynced_since);
        }
        if !checkpoints.is_empty() {
            let result = match &log {
                Some(_) => checkpoint(db, path, &mut log),
                // Without a log every acknowledged record is already in a durable commit;
                // in async mode, sync what is not.
                None if unsynced_since.is_some() => sync_or_log(&mut unsynced_since),
                None => Ok(()),
            };
            if flush_result.is_ok() {
                flush_result = result;
            }
        }
        let answer = flush_result
            .as_ref()
            .map(|_| ())
            .map_err(ToString::to_string);
        for done in flushes {
            let _ = done.send(answer.clone());
        }
        for done in checkpoints {
            let _ = done.send(answer.clone());
        }
    }
}

/// Writes `puts` to the log and starts their fsync; whether it did. A batch the log cannot
/// take is left to [`finish_log_append`]'s checkpoint; a log that fails to write is given up
/// (the journal goes on with `Immediate` commits).
fn start_log_append(log: &mut Option<WriteAheadLog>, puts: &[&Put]) -> bool {
    let Some(wal) = log.as_mut() else {
        return false;
    };
    let bytes = puts.iter().map(|p| wal::frame_len(p.json.len())).sum();
    if !wal.fits(bytes) {
        return false;
    }
    match wal.start_append(puts.iter().map(|p| p.json.as_slice())) {
        Ok(()) => true,
        Err(e) => {
            log_failed(wal, &e);
            abandon(log);
            false
        }
    }
}

/// Makes a batch just committed with `Durability::None` durable: waits for its fsync in the
/// log when [`start_log_append`] started one, else (a batch the log could not take, or no
/// log left) by a [`checkpoint`]. A log whose fsync fails is given up, after an
/// `Immediate` commit that makes the batch durable.
fn finish_log_append(
    db: &Database,
    path: &Path,
    log: &mut Option<WriteAheadLog>,
    in_log: bool,
) -> Result<()> {
    if in_log && let Some(wal) = log.as_mut() {
        match wal.finish_append() {
            Ok(()) => return Ok(()),
            Err(e) => {
                log_failed(wal, &e);
                abandon(log);
                return guard(path, || sync(db));
            }
        }
    }
    checkpoint(db, path, log)
}

fn log_failed(wal: &WriteAheadLog, e: &std::io::Error) {
    tracing::error!(
        log = %wal.path().display(),
        "the activity write-ahead log cannot be written ({e}); committing records straight \
         to the journal file from now on"
    );
}

/// An `Immediate` commit (persisting every `None` commit before it), then the log, whose
/// records that commit holds, starts over.
fn checkpoint(db: &Database, path: &Path, log: &mut Option<WriteAheadLog>) -> Result<()> {
    guard(path, || sync(db)).inspect_err(|e| {
        tracing::error!("activity journal checkpoint failed: {e}");
    })?;
    if let Some(wal) = log.as_mut()
        && let Err(e) = wal.start_over()
    {
        tracing::error!(
            log = %wal.path().display(),
            "the activity write-ahead log cannot be started over ({e}); committing records \
             straight to the journal file from now on"
        );
        abandon(log);
    }
    Ok(())
}

/// Stops using the log and removes its file, whose frames a later start must not replay
/// over newer rows.
fn abandon(log: &mut Option<WriteAheadLog>) {
    if let Some(wal) = log.take()
        && let Err(e) = std::fs::remove_file(wal.path())
    {
        tracing::error!(
            log = %wal.path().display(),
            "cannot remove the abandoned activity write-ahead log ({e}); remove it before the \
             next start, or it may restore older versions of the newest records"
        );
    }
}

/// Replays the payloads of a write-ahead log into `db` (one `Immediate` commit): for each
/// record its last payload, written only where the stored row differs, so a record the file
/// already holds is neither rewritten nor queued for the sinks again. A payload that is not
/// a record is skipped with a warning. Returns how many records it wrote.
pub(super) fn replay(db: &Database, payloads: Vec<Vec<u8>>, outbox: bool) -> Result<usize> {
    let mut puts: Vec<Put> = Vec::new();
    let mut at: HashMap<[u8; 16], usize> = HashMap::new();
    for json in payloads {
        match Put::from_stored(json) {
            Ok(put) => match at.get(&put.key) {
                Some(&i) => puts[i] = put,
                None => {
                    at.insert(put.key, puts.len());
                    puts.push(put);
                }
            },
            Err(e) => tracing::warn!("skipping an unreadable write-ahead log entry: {e}"),
        }
    }
    if puts.is_empty() {
        return Ok(0);
    }
    let txn = db.begin_write()?;
    let changed: Vec<&Put> = {
        let records = txn.open_table(RECORDS)?;
        let mut changed = Vec::new();
        for put in &puts {
            if records
                .get(put.key)?
                .is_none_or(|row| row.value() != put.json.as_slice())
            {
                changed.push(put);
            }
        }
        changed
    };
    apply_puts(&txn, &changed, outbox)?;
    txn.commit()?;
    Ok(changed.len())
}
