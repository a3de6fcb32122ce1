//! The writer thread: its setup and state ([`Writer`]), its loop (take a batch, write it),
//! the deadlines it keeps while it waits (Async mode's syncs, the log's fsyncs, applies and
//! idle checkpoints, the recovery's retries, signing the hash chain's head an interval after
//! a write), its close, and the database operations that
//! note a failing or damaged disk. Its timing constants live here too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use redb::Database;

use super::applied::AppliedPuts;
use super::batch::Batch;
use super::messages::{Command, Failure, Put};
use crate::journal::Durability;
use crate::journal::database::{DbSlot, guard};
use crate::journal::health::Health;
use crate::journal::storage::WriteFaults;
use crate::journal::wal::WriteAheadLog;
use crate::{Error, Result};

/// Lowers the calling thread's scheduling priority (nice 10), so that on a busy machine the
/// threads serving calls, and the upstreams they wait for, run first. For `durability:
/// async` only: nobody waits for those commits, while with `sync` every allowed call waits.
pub(in crate::journal) fn yield_to_calls() {
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
pub(in crate::journal) const SYNC_CARRY: Duration = Duration::from_millis(2);

/// How long the writer waits in `Durability::Sync` without writes before it checkpoints a
/// non-empty write-ahead log.
pub(in crate::journal) const CHECKPOINT_IDLE: Duration = Duration::from_secs(1);

/// How long, in sync mode with a log, acknowledged records wait to be applied to redb
/// (unless a read asks for them first), so one transaction holds several calls' records.
/// Against 2 ms, 10 ms took ~80 µs off a call at c=1 on two cores (fewer transactions for
/// the same records, less CPU taken from the calls); 30 ms gained nothing more.
pub(super) const APPLY_LINGER: Duration = Duration::from_millis(10);

/// What the writer thread is told at start.
pub(in crate::journal) struct WriterSetup {
    pub(in crate::journal) durability: Durability,
    /// See [`crate::journal::JournalOptions::sync_carry`].
    pub(in crate::journal) sync_carry: Duration,
    /// See [`crate::journal::JournalOptions::checkpoint_idle`].
    pub(in crate::journal) checkpoint_idle: Duration,
    pub(in crate::journal) on_commit: Option<crate::journal::CommitObserver>,
    pub(in crate::journal) on_fsync: Option<crate::journal::FsyncObserver>,
    /// Sync mode's write-ahead log, if it has one.
    pub(in crate::journal) log: Option<WriteAheadLog>,
    /// Shared with the journal's readers.
    pub(in crate::journal) applied: Arc<AppliedPuts>,
    /// redb's page cache, for a re-open.
    pub(in crate::journal) cache_bytes: usize,
    /// The log's size, for re-creating it after a failure (0: sync mode has no log).
    pub(in crate::journal) log_capacity: u64,
    /// See [`crate::journal::JournalOptions::write_faults`].
    pub(in crate::journal) faults: Option<WriteFaults>,
    /// Shared with the journal: `failing` while writes fail.
    pub(in crate::journal) health: Arc<Health>,
    /// The hash chain's signing key and checkpoint intervals.
    pub(in crate::journal) chain: Arc<crate::chain::link::Chainer>,
}

/// Most puts the writer keeps in memory while the journal fails (records nobody waited for,
/// and acknowledged records the redb file may lack): past this they are logged as lost.
pub(super) const MAX_KEPT: usize = crate::journal::MAX_QUEUED;

/// The writer thread's state.
pub(super) struct Writer<'a> {
    /// The database, `None` only while a re-open after a failure has not succeeded.
    pub(super) db: Option<Arc<Database>>,
    /// Where readers find the database.
    pub(super) slot: &'a DbSlot,
    pub(super) path: &'a Path,
    pub(super) outbox_on: &'a AtomicBool,
    pub(super) setup: WriterSetup,
    /// Async mode: when the oldest commit not yet fsync'd was made.
    pub(super) unsynced_since: Option<Instant>,
    /// Async mode: the records committed since the last fsync. redb forgets them if it is
    /// re-opened after an I/O error, so they are kept until an fsync holds them (at most
    /// [`MAX_KEPT`]: past that the writer fsyncs early).
    pub(super) unsynced: Vec<Put>,
    /// Sync mode with a log: when the oldest frame not yet fsync'd was written.
    pub(super) log_unsynced_since: Option<Instant>,
    /// When the last batch was written (the idle checkpoint counts from here).
    pub(super) last_write: Instant,
    /// Sync mode with a log: records in the log (acknowledged) not yet applied to redb.
    pub(super) unapplied: Vec<Put>,
    /// When the oldest of `unapplied` was acknowledged.
    pub(super) unapplied_since: Option<Instant>,
    /// Set once a transaction found the file damaged: from then on nothing touches it.
    pub(super) damaged: Option<String>,
    /// Set while writes fail (see `recovery`).
    pub(super) failing: Option<super::recovery::Failing>,
    /// A write-ahead log given up while it may hold records the redb file has not made
    /// durable: removed after the next full commit.
    pub(super) abandoned_log: Option<PathBuf>,
    /// The next number for a put somebody waits for (see [`Put::seq`]).
    pub(super) next_seq: u64,
    /// When the first batch since the last signing was written: the chain's head is signed
    /// [`Chainer::interval_ms`](crate::chain::link::Chainer) after it, writes or not.
    pub(super) unsigned_since: Option<Instant>,
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
    /// The chain's head has been unsigned for the checkpoint interval: sign it.
    Sign,
}

pub(in crate::journal) fn writer_loop(
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
        unsigned_since: None,
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
        writer.unsigned_since.get_or_insert_with(Instant::now);
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
        let interval = Duration::from_millis(setup.chain.interval_ms);
        let sign = self
            .unsigned_since
            .and_then(|t| t.checked_add(interval))
            .map(|at| (at, Due::Sign));
        candidates
            .into_iter()
            .chain([sign])
            .flatten()
            .min_by_key(|(at, _)| *at)
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
            Due::Sign => {
                // Records the log holds are chained once applied: apply them first.
                let _ = self.apply();
                self.sign_head();
                self.unsigned_since = None;
            }
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
        self.sign_head();
        if self.unsynced_since.is_some() {
            let _ = self.sync_commits();
        }
        if self.setup.log.as_ref().is_some_and(|log| !log.is_empty()) {
            let _ = self.checkpoint();
        }
    }

    /// Signs the chain's head if records were chained since the last checkpoint (on close,
    /// so a clean stop leaves the whole chain signed).
    fn sign_head(&mut self) {
        let chain = self.setup.chain.clone();
        let result = self.db_op(|db| {
            let mut txn = db.begin_write()?;
            txn.set_durability(redb::Durability::Immediate)?;
            if crate::chain::link::checkpoint_now(&txn, &chain)?.1 {
                txn.commit()?;
            } else {
                txn.abort()?;
            }
            Ok(())
        });
        if let Err(e) = result {
            tracing::warn!("cannot sign the activity chain's head as the journal closes: {e}");
        }
    }

    /// Runs `f` on the database under [`guard`]. An error that is the disk's puts the writer
    /// in the failing state; one that is damage stops it touching the file.
    pub(super) fn db_op<T>(&mut self, f: impl FnOnce(&Database) -> Result<T>) -> Result<T> {
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
    pub(super) fn note_error(&mut self, e: &Error) {
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
}
