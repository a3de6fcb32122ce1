//! The journal's writer thread: the queued commands, group commit of everything queued into
//! one transaction (each record once, as its latest put; falling back to one record per
//! transaction on failure), the short linger and the `Immediate` syncs of Async mode, and the
//! transaction helpers that apply puts; in Sync mode, the write-ahead log's appends,
//! checkpoints and replay.
//!
//! Every transaction runs under [`guard`](super::guard): if one finds the file damaged, the
//! writer answers that write and every later one with
//! [`Error::Damaged`](crate::Error::Damaged) and no longer touches the file.
//!
//! A write the disk refuses (a full disk, an I/O error) puts the writer in the *failing*
//! state (see `recovery`): the journal's health says why, records somebody waits for are
//! refused, the rest are kept in memory, and the writer retries with backoff, re-opening
//! redb (which refuses everything after an I/O error until it is re-opened) and the
//! write-ahead log, until a write works again.
//!
//! The parts: `messages` (what is sent to the writer), `applied` (how far it has applied
//! what was sent, for reads), `batch` (the commands taken in one go), `thread` (the writer's
//! state and loop), `commit` (writing a batch), `syncs` (fsyncs, the log, checkpoints),
//! `transactions` (the helpers that apply puts), `replay` (writing back a log's records),
//! `recovery` (the failing state and the way back).

mod applied;
mod batch;
mod commit;
mod messages;
mod recovery;
mod replay;
mod syncs;
mod thread;
mod transactions;

pub(super) use applied::AppliedPuts;
pub(super) use messages::{Command, Failure, Put, Unencoded};
pub(super) use replay::replay;
#[cfg(test)]
pub(super) use replay::write_missing;
pub(super) use thread::{CHECKPOINT_IDLE, SYNC_CARRY, WriterSetup, writer_loop, yield_to_calls};
pub(super) use transactions::commit_puts;
#[cfg(test)]
pub(super) use transactions::latest_per_key;
