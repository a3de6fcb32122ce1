//! What producers send the writer thread: the [`Command`]s, a record ready to write
//! ([`Put`]) or still to encode ([`Unencoded`]), the answers waiting callers get, and a
//! [`Failure`] of the disk another thread found.

use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::batch::reply;
use crate::journal::schema::{IndexKeys, index_keys, parse_key};
use crate::record::ActivityRecord;
use crate::{Error, Result};

pub(super) type Ack = oneshot::Sender<std::result::Result<(), String>>;

/// The answer to a checkpoint, which blocking code (retention) waits for.
pub(super) type BlockingAck = std::sync::mpsc::Sender<std::result::Result<(), String>>;

/// The buffer a record is encoded into to begin with. A tool call's record is 600–900
/// bytes; `serde_json::to_vec` starts at 128 and grew it three times, each a `realloc` on
/// the writer thread that took malloc's lock from the threads answering calls.
const ENCODED_CAPACITY: usize = 1024;

/// A record ready for the writer.
pub(in crate::journal) struct Put {
    pub(in crate::journal) key: [u8; 16],
    pub(in crate::journal) json: Vec<u8>,
    pub(in crate::journal) keys: IndexKeys,
    pub(in crate::journal) ack: Option<Ack>,
    /// A queue slot, released when the writer is done with the record.
    pub(in crate::journal) slot: Option<OwnedSemaphorePermit>,
    /// With the log: the writer's number for a put somebody waited for (0: nobody did), so
    /// a batch that fails can tell its own refused records from those acknowledged before.
    pub(super) seq: u64,
    /// A row carried over as it was stored (a repair): written verbatim, chain fields and
    /// all, never linked again.
    pub(in crate::journal) carried: bool,
}

impl Put {
    /// Serializes `record`, bounded ([`ActivityRecord::bounded`]) and, with `summarise`,
    /// summarised ([`ActivityRecord::summarised`]), and computes its key and index keys.
    pub(in crate::journal) fn new(record: &ActivityRecord, summarise: bool) -> Result<Self> {
        let bounded = record.bounded();
        let summary = summarise.then(|| bounded.summarised());
        let record = summary.as_ref().unwrap_or(bounded.as_ref());
        let key = parse_key(&record.id)?;
        let mut json = Vec::with_capacity(ENCODED_CAPACITY);
        serde_json::to_writer(&mut json, record).map_err(|source| Error::Encode {
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
            carried: false,
        })
    }

    /// The put to keep in memory: its waiter (if any) told `result`, its queue slot freed.
    pub(super) fn settled(mut self, result: &Result<()>) -> Self {
        if let Some(ack) = self.ack.take() {
            let _ = ack.send(reply(result));
        }
        self.slot = None;
        self
    }

    /// A put of a row as stored (a write-ahead log entry), already bounded.
    pub(in crate::journal) fn from_stored(json: Vec<u8>) -> Result<Self> {
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
            carried: false,
        })
    }
}

/// A record nobody waits for, which the writer encodes into a [`Put`] as it takes it: the
/// encoding's CPU is the writer's, not that of the thread that answers the call.
pub(in crate::journal) struct Unencoded {
    pub(in crate::journal) record: Box<ActivityRecord>,
    /// Store it summarised (the journal was under pressure when it was sent).
    pub(in crate::journal) summarise: bool,
    pub(in crate::journal) slot: Option<OwnedSemaphorePermit>,
}

impl Unencoded {
    /// The put, or the record's id and why it cannot be encoded.
    pub(super) fn encode(self) -> std::result::Result<Put, (String, Error)> {
        match Put::new(&self.record, self.summarise) {
            Ok(mut put) => {
                put.slot = self.slot;
                Ok(put)
            }
            Err(e) => Err((self.record.id, e)),
        }
    }
}

pub(in crate::journal) enum Command {
    Put(Put),
    /// A put the writer encodes first.
    Record(Unencoded),
    /// Answered once everything queued before it is durable.
    Flush(Ack),
    /// Answered once everything queued before it is in the redb file with an `Immediate`
    /// commit and the write-ahead log (if any) has started over.
    Checkpoint(BlockingAck),
    /// A reader waits to see everything queued before it (see
    /// [`AppliedPuts`](super::applied::AppliedPuts)): apply it now.
    Apply,
    /// Another thread's transaction (retention, a sink's cursor) found the disk failing.
    Failed(Failure),
}

/// A failure of the disk under the journal, as opposed to one record's (see [`Failure::of`]).
#[derive(Debug, Clone)]
pub(in crate::journal) struct Failure {
    /// What operators are told: the OS's description of the error.
    pub(super) reason: String,
    /// redb met the error: it refuses everything until it is closed and re-opened.
    pub(super) reopen: bool,
}

impl Failure {
    /// The failure behind `e`, when `e` is the disk's (an I/O error, or redb refusing to go
    /// on after one) and not one record's (an id, an encoding).
    pub(in crate::journal) fn of(e: &Error) -> Option<Self> {
        let redb = |reason: String| {
            Some(Self {
                reason,
                reopen: true,
            })
        };
        match e {
            Error::Storage(redb::Error::Io(io)) => redb(crate::journal::storage::describe(io)),
            Error::Storage(e @ (redb::Error::PreviousIo | redb::Error::TransactionPoisoned)) => {
                redb(e.to_string())
            }
            Error::Io { source, .. } => Some(Self {
                reason: crate::journal::storage::describe(source),
                reopen: false,
            }),
            _ => None,
        }
    }
}
