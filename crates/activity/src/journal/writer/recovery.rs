//! The writer while the disk refuses its writes (a full disk, an I/O error), and its way
//! back without a restart.
//!
//! On the first failure the writer enters the *failing* state ([`Failing`]): the journal's
//! health says `failing` with the reason, and from then on
//!
//! - a record somebody waits for (a call's `pending` record) is refused: the producer checks
//!   the health before it queues, and the writer answers what was queued with the error, so
//!   the call is not run;
//! - a record nobody waits for (a call's outcome, async mode's records) is kept in memory,
//!   as are the records acknowledged earlier that the redb file may lack (sync mode's
//!   records applied from the write-ahead log, async mode's commits since the last fsync):
//!   redb forgets its unsynced commits when it is re-opened;
//! - the records of the batch the disk failed under that somebody waited for are refused
//!   too, and remembered, so that whatever of them reached the file is removed.
//!
//! Every retry (50 ms after the failure, then twice as long each time, up to 2 s) first
//! writes a scratch file beside the journal; only once that works does it close and
//! re-open redb (it refuses every operation after an I/O error until then), write back
//! what the write-ahead log holds and what was kept (only rows the file lacks, so the sinks
//! get nothing twice), remove the refused records and start the log over (re-creating it if
//! it was given up). Then the health is `ok` again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::batch::Batch;
use super::messages::{Ack, BlockingAck, Failure, Put};
use super::replay::{stored_puts, write_missing};
use super::syncs::remove_abandoned_log;
use super::thread::{MAX_KEPT, Writer};
use super::transactions::latest;
use crate::journal::database::open_database_with;
use crate::journal::schema::IDX_STATUS;
use crate::journal::storage;
use crate::journal::wal::{self, WriteAheadLog};
use crate::journal::{Durability, guard};
use crate::record::Status;
use crate::{Error, Result};

/// The first retry after a failure.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest wait between retries.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// The writer's state while writes fail.
pub(super) struct Failing {
    /// Why (the first failure's reason, then the latest retry's).
    pub(super) reason: String,
    /// redb must be closed and re-opened before it writes again.
    reopen: bool,
    /// Records to write once the disk takes writes again, in queue order.
    pub(super) kept: Vec<Put>,
    /// Records somebody waited for that were refused while they may have reached the disk.
    refused: Vec<Put>,
    /// Records that did not fit in `kept` (logged).
    lost: usize,
    /// When to retry.
    pub(super) retry_at: Instant,
    backoff: Duration,
}

impl Writer<'_> {
    /// The error records are refused with while writes fail.
    pub(super) fn unwritable(&self) -> Error {
        let reason = match (&self.failing, &self.damaged) {
            (Some(failing), _) => failing.reason.clone(),
            (None, Some(damaged)) => damaged.clone(),
            (None, None) => "the writer is re-opening the journal".to_owned(),
        };
        Error::Unwritable { reason }
    }

    /// Enters the failing state (or, already in it, notes that redb must be re-opened).
    pub(super) fn fail(&mut self, failure: Failure) {
        if let Some(failing) = &mut self.failing {
            failing.reopen |= failure.reopen;
            return;
        }
        tracing::error!(
            "the activity journal {} cannot write ({}): every call is refused until it can. \
             Free space on the disk under it (or fix the disk); it retries by itself, no \
             restart needed",
            self.path.display(),
            failure.reason
        );
        self.setup.health.fail(&failure.reason);
        self.failing = Some(Failing {
            reason: failure.reason,
            reopen: failure.reopen,
            kept: Vec::new(),
            refused: Vec::new(),
            lost: 0,
            retry_at: Instant::now() + RETRY_FIRST,
            backoff: RETRY_FIRST,
        });
        // What is acknowledged but not surely in the file: written back by the recovery.
        let unapplied = std::mem::take(&mut self.unapplied);
        self.setup.applied.advance(unapplied.len());
        let unsynced = std::mem::take(&mut self.unsynced);
        for put in unsynced.into_iter().chain(unapplied) {
            self.keep(put);
        }
        self.unapplied_since = None;
        self.unsynced_since = None;
        self.log_unsynced_since = None;
    }

    /// Keeps `put` for the recovery (its waiter, if it still has one, is refused).
    pub(super) fn keep(&mut self, put: Put) {
        let refused = self.unwritable();
        let Some(failing) = &mut self.failing else {
            return;
        };
        if failing.kept.len() < MAX_KEPT {
            failing.kept.push(put.settled(&Err(refused)));
        } else {
            if failing.lost == 0 {
                tracing::error!(
                    "the activity journal cannot write and keeps at most {MAX_KEPT} records in \
                     memory meanwhile: further records nobody waits for (calls' outcomes) are \
                     lost until it writes again"
                );
            }
            failing.lost += 1;
        }
    }

    /// Answers a batch while writes fail: records somebody waits for are refused, the
    /// others kept; flushes and checkpoints fail.
    pub(super) fn refuse_while_failing(&mut self, batch: Batch) {
        let Batch {
            puts,
            flushes,
            checkpoints,
            ..
        } = batch;
        self.refuse_failed(puts, flushes, checkpoints, false);
    }

    /// [`refuse_while_failing`](Self::refuse_while_failing) with its parts; `touched`: the
    /// puts may have reached the file (the disk failed under them), so the refused ones are
    /// remembered for removal.
    pub(super) fn refuse_failed(
        &mut self,
        puts: Vec<Put>,
        flushes: Vec<Ack>,
        checkpoints: Vec<BlockingAck>,
        touched: bool,
    ) {
        self.setup.applied.advance(puts.len());
        let refusal = self.unwritable();
        let text = refusal.to_string();
        for mut put in puts {
            match put.ack.take() {
                Some(ack) => {
                    let _ = ack.send(Err(text.clone()));
                    if touched {
                        self.remember_refused(put);
                    }
                }
                None => self.keep(put),
            }
        }
        for done in flushes {
            let _ = done.send(Err(text.clone()));
        }
        for done in checkpoints {
            let _ = done.send(Err(text.clone()));
        }
    }

    /// Moves the records of the batch numbered from `first_seq` (those somebody waits for,
    /// now refused) from what is kept to what is refused.
    pub(super) fn refuse_since(&mut self, first_seq: u64) {
        let Some(failing) = &mut self.failing else {
            return;
        };
        let (refused, kept): (Vec<Put>, Vec<Put>) = std::mem::take(&mut failing.kept)
            .into_iter()
            .partition(|put| put.seq >= first_seq);
        failing.kept = kept;
        for put in refused {
            self.remember_refused(put);
        }
    }

    fn remember_refused(&mut self, put: Put) {
        if let Some(failing) = &mut self.failing
            && failing.refused.len() < MAX_KEPT
        {
            failing.refused.push(put.settled(&Ok(())));
        }
    }

    /// One retry: on success the journal is `ok` again; on failure the next retry waits
    /// twice as long (at most [`RETRY_MAX`]).
    pub(super) fn recover(&mut self) {
        if self.failing.is_none() || self.damaged.is_some() {
            return;
        }
        match self.try_recover() {
            Ok(written) => {
                let lost = self.failing.take().map_or(0, |f| f.lost);
                self.setup.health.recover();
                self.last_write = Instant::now();
                tracing::info!(
                    "the activity journal writes again; wrote back {written} records kept \
                     while it could not"
                );
                if lost > 0 {
                    tracing::error!(
                        "{lost} activity records made while the journal could not write were \
                         lost (past the {MAX_KEPT} it keeps in memory)"
                    );
                }
            }
            Err(e) => {
                let failure = Failure::of(&e);
                let Some(failing) = &mut self.failing else {
                    return;
                };
                if let Some(failure) = failure {
                    failing.reopen |= failure.reopen;
                    if failing.reason != failure.reason {
                        tracing::warn!(
                            "the activity journal still cannot write: {}",
                            failure.reason
                        );
                        failing.reason = failure.reason;
                        self.setup.health.fail(&failing.reason);
                    }
                } else {
                    tracing::warn!("re-opening the activity journal failed (it retries): {e}");
                }
                failing.backoff = (failing.backoff * 2).min(RETRY_MAX);
                failing.retry_at = Instant::now() + failing.backoff;
            }
        }
    }

    /// Probe, re-open, write back, start the log over; how many records were written.
    fn try_recover(&mut self) -> Result<usize> {
        storage::probe(self.path, self.setup.faults.as_ref()).map_err(|source| Error::Io {
            path: self.path.to_path_buf(),
            source,
        })?;
        if self.failing.as_ref().is_some_and(|f| f.reopen) {
            self.reopen()?;
            if let Some(failing) = &mut self.failing {
                failing.reopen = false;
            }
        }
        let written = self.write_kept()?;
        self.restore_log();
        Ok(written)
    }

    /// Closes redb and opens it again (redb repairs a file an I/O error left unfinished).
    /// Readers see no database meanwhile ([`Error::Reopening`]); one that still holds the
    /// old handle keeps it open, and the open fails until it lets go (the next retry).
    fn reopen(&mut self) -> Result<()> {
        drop(self.slot.take());
        drop(self.db.take());
        let db = open_database_with(
            self.path,
            self.setup.cache_bytes,
            self.setup.faults.as_ref(),
        )?;
        let db = Arc::new(db);
        self.slot.put(db.clone());
        self.db = Some(db);
        tracing::info!(
            path = %self.path.display(),
            "re-opened the activity journal after a write failure"
        );
        Ok(())
    }

    /// Writes, in one `Immediate` commit, what the write-ahead log holds (the acknowledged
    /// records of sync mode), then what was kept, each only where the file lacks it, and
    /// removes the refused records the file holds; how many records it wrote.
    fn write_kept(&mut self) -> Result<usize> {
        let Some(db) = self.db.clone() else {
            return Err(self.unwritable());
        };
        let (kept, refused) = match &mut self.failing {
            Some(failing) => (
                std::mem::take(&mut failing.kept),
                std::mem::take(&mut failing.refused),
            ),
            None => return Ok(0),
        };
        let result = (|| {
            let log_path = wal::path_for(self.path);
            let logged = if log_path.exists() {
                let payloads = wal::read(&log_path).map_err(|source| Error::Io {
                    path: log_path.clone(),
                    source,
                })?;
                let refused: HashSet<([u8; 16], &[u8])> =
                    refused.iter().map(|p| (p.key, p.json.as_slice())).collect();
                stored_puts(payloads)
                    .into_iter()
                    .filter(|p| !refused.contains(&(p.key, p.json.as_slice())))
                    .collect()
            } else {
                Vec::new()
            };
            let puts = latest(logged.iter().chain(&kept));
            let pending = Some(Status::Pending.as_str());
            let refused: Vec<&Put> = refused
                .iter()
                .filter(|p| p.keys[IDX_STATUS].as_deref() == pending)
                .collect();
            let outbox = self.outbox_on.load(std::sync::atomic::Ordering::SeqCst);
            guard(self.path, || {
                write_missing(&db, &puts, &refused, outbox, &self.setup.chain)
            })
        })();
        match result {
            Ok(written) => {
                self.fsynced();
                self.synced();
                Ok(written)
            }
            Err(e) => {
                if let Some(failing) = &mut self.failing {
                    failing.kept = kept;
                    failing.refused = refused;
                }
                self.note_error(&e);
                Err(e)
            }
        }
    }

    /// After a recovery, the write-ahead log starts over (everything it held is in the
    /// file); one given up is created again. If that fails the journal goes on with full
    /// commits, as when the log is given up.
    fn restore_log(&mut self) {
        if let Some(log) = self.setup.log.as_mut() {
            match log.start_over() {
                Ok(()) => {
                    self.fsynced();
                    return;
                }
                Err(e) => self.give_up_log(&e),
            }
        }
        let log_path = wal::path_for(self.path);
        self.abandoned_log = None;
        let wanted =
            matches!(self.setup.durability, Durability::Sync) && self.setup.log_capacity > 0;
        if !wanted {
            if log_path.exists() {
                remove_abandoned_log(&log_path);
            }
            return;
        }
        let faults = self.setup.faults.clone();
        let opened = WriteAheadLog::open(&log_path, self.setup.log_capacity).and_then(
            |(mut log, _already_written)| {
                log.faults = faults;
                log.start_over()?;
                Ok(log)
            },
        );
        match opened {
            Ok(log) => {
                tracing::info!(log = %log_path.display(), "the activity write-ahead log is in use again");
                self.setup.log = Some(log);
            }
            Err(e) => {
                tracing::warn!(
                    log = %log_path.display(),
                    "cannot create the activity write-ahead log again ({e}); every record in \
                     sync mode costs a full journal commit"
                );
                remove_abandoned_log(&log_path);
            }
        }
    }
}
