//! How the writer writes a batch: group commit of the batch's records (each once, as its
//! latest put; one record per transaction if that fails), with Async mode's unsynced
//! window; in Sync mode with the write-ahead log, the batch's frames in the log,
//! acknowledged once fsync'd and applied to redb a moment later.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::batch::{Batch, Written, ack, reply};
use super::messages::Put;
use super::thread::{MAX_KEPT, Writer};
use super::transactions::{commit_puts, latest_per_key};
use crate::journal::schema::key_id;
use crate::journal::{Durability, MAX_BATCH};
use crate::{Error, Result};

impl Writer<'_> {
    /// Writes a batch and answers everyone in it.
    pub(super) fn write(&mut self, mut batch: Batch) {
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
        let chain = self.setup.chain.clone();
        let result = self.db_op(|db| commit_puts(db, &refs, durability, outbox, &chain));
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

    /// With the log: writes the batch's records to it, acknowledges them once it is fsync'd (a
    /// batch nobody waits for: at the next fsync, at most [`SYNC_CARRY`](super::thread::SYNC_CARRY)
    /// later) and keeps them to apply to redb in a moment
    /// ([`APPLY_LINGER`](super::thread::APPLY_LINGER), or at once when a reader asks). A batch the
    /// log cannot take is applied and made durable by a checkpoint.
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
    pub(super) fn apply(&mut self) -> Result<()> {
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
        let chain = self.setup.chain.clone();
        let result = self.db_op(|db| commit_puts(db, &latest_per_key(&puts), none, outbox, &chain));
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
                let chain = self.setup.chain.clone();
                self.db_op(|db| commit_puts(db, &[put], durability, outbox, &chain))
            };
            if result.is_ok() {
                self.committed(durability);
            }
            outcomes.insert(put.key, result);
        }
        outcomes
    }
}
