//! The commands the writer takes in one go ([`Batch`]): gathering them (with Sync mode's
//! carry of records nobody waits for), what became of their puts ([`Written`]), and the
//! answers their waiting callers get.

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::applied::AppliedPuts;
use super::messages::{Ack, BlockingAck, Command, Failure, Put};
use crate::journal::MAX_BATCH;
use crate::journal::schema::key_id;
use crate::{Error, Result};

/// What a waiting caller is told of `result`.
pub(super) fn reply(result: &Result<()>) -> std::result::Result<(), String> {
    result.as_ref().map(|_| ()).map_err(|e| match e {
        // Already a write failure's text: do not prefix it twice.
        Error::Write(text) => text.clone(),
        e => e.to_string(),
    })
}

pub(super) fn ack(put: Put, result: &Result<()>) {
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

/// The commands the writer takes in one go.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) puts: Vec<Put>,
    pub(super) flushes: Vec<Ack>,
    pub(super) checkpoints: Vec<BlockingAck>,
    /// A reader asked for everything to be applied.
    pub(super) apply: bool,
    /// Records that could not be encoded (logged, counted as applied).
    pub(super) dropped: usize,
    /// Another thread found the disk failing.
    pub(super) failed: Option<Failure>,
}

impl Batch {
    /// Adds `command` to the batch.
    pub(super) fn take(&mut self, command: Command) {
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
    pub(super) fn take_queued(&mut self, rx: &Receiver<Command>) {
        while self.puts.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(command) => self.take(command),
                Err(_) => return,
            }
        }
    }

    /// Whether somebody waits for this batch to be durable: an acknowledged put, a flush, a
    /// checkpoint. (A reader's [`Command::Apply`] asks for it to be readable only.)
    pub(super) fn awaited(&self) -> bool {
        !self.flushes.is_empty()
            || !self.checkpoints.is_empty()
            || self.puts.iter().any(|put| put.ack.is_some())
    }

    /// In `Durability::Sync` without a log, when nobody waits for the batch: takes more commands
    /// for up to `carry` ([`SYNC_CARRY`](super::thread::SYNC_CARRY) by default), until one that
    /// somebody waits for or a full batch, so they share one commit.
    pub(super) fn carry_unawaited(&mut self, rx: &Receiver<Command>, carry: Duration) {
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
    pub(super) fn refuse(self, message: &str, applied: &AppliedPuts) {
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
pub(super) enum Written {
    /// The same for every put.
    All(Result<()>),
    /// Retried one record at a time: each record's outcome.
    Each(HashMap<[u8; 16], Result<()>>),
}
