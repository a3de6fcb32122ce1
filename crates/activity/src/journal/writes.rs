//! The journal's writes from producers: [`Journal::append`], [`Journal::upsert`] and
//! [`Journal::submit`] queue a record for the writer (failing closed while the journal
//! cannot write), [`Journal::flush`] waits until it is durable; closing the records a
//! previous process left pending; and the bulk load of benches and imports.

use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::writer::{Command, Put, Unencoded, commit_puts};
use super::{Durability, Journal, MAX_BATCH};
use crate::record::{ActivityRecord, Status};
use crate::{Error, Result};

impl Journal {
    /// `record` with this journal's replica name, unless it names one already.
    fn stamped(&self, mut record: ActivityRecord) -> ActivityRecord {
        if record.replica.is_none() {
            record.replica.clone_from(&self.options.replica);
        }
        record
    }

    async fn put(&self, record: ActivityRecord) -> Result<()> {
        let record = self.stamped(record);
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
    /// [`MAX_QUEUED`](super::MAX_QUEUED). The writer thread encodes the record, not the
    /// caller (a call's outcome is submitted on its way back to the client).
    pub fn submit(&self, record: ActivityRecord) {
        let record = self.stamped(record);
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

    /// Closes the records a previous process left `pending` (it stopped or crashed while
    /// their calls were in flight): each becomes `error` with a message saying the outcome
    /// is unknown, so it is complete in the journal and reaches the sinks. Call it once at
    /// startup, before any call starts: this process owns the file, so nothing of its own
    /// is pending yet. Returns how many were closed.
    pub async fn close_interrupted(&self) -> Result<usize> {
        let pending = crate::Filter {
            status: Some(Status::Pending),
            ..crate::Filter::default()
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

    /// Writes `rows` (records as another journal stored them) verbatim, chain fields and all,
    /// in transactions of up to [`MAX_BATCH`], bypassing the channel: a repair's carry-over,
    /// so the saved records keep their place in the chain they were signed in.
    pub(crate) fn bulk_load_stored(&self, rows: Vec<Vec<u8>>) -> Result<()> {
        let mut rows = rows.into_iter().peekable();
        while rows.peek().is_some() {
            let puts = rows
                .by_ref()
                .take(MAX_BATCH)
                .map(|json| {
                    Put::from_stored(json).map(|mut put| {
                        put.carried = true;
                        put
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            self.commit_now(&puts)?;
        }
        Ok(())
    }

    /// Commits `puts` in one `Immediate` transaction with the writer's code path (the chain
    /// linked, the outbox fed when it is on), outside the writer's channel.
    fn commit_now(&self, puts: &[Put]) -> Result<()> {
        let refs: Vec<&Put> = puts.iter().collect();
        let outbox = self.outbox_on.load(Ordering::SeqCst);
        self.guard(|| {
            commit_puts(
                &*self.db()?,
                &refs,
                redb::Durability::Immediate,
                outbox,
                &self.chain,
            )
        })
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
            self.commit_now(&puts)?;
        }
        Ok(())
    }
}
