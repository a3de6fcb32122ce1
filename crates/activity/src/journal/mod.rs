//! The journal: a redb file written by one writer thread with group commit.
//!
//! Producers queue their record on a channel. A producer that waits for the commit (`append`
//! and `upsert` in sync mode) serializes the record first; otherwise (`submit`, and every
//! write in async mode) the writer thread does, so a call's thread does not spend its time
//! on records nobody waits for. The writer thread takes everything queued (up to
//! [`MAX_BATCH`]) into one write transaction and commits it:
//!
//! - [`Durability::Sync`]: `append` resolves once its record is durable, so an acknowledged
//!   record survives `kill -9` and power loss. Each batch is committed to redb without an
//!   fsync and appended to the write-ahead log (`activity.redb-wal`, see `wal`), which is
//!   fsync'd: one or two pages instead of the ~20 of an `Immediate` commit. A *checkpoint*
//!   (an `Immediate` commit, then the log starts over) runs when the log is full, after
//!   [`JournalOptions::checkpoint_idle`] without writes, before each retention pass and on
//!   close; [`Journal::open`] replays what a crash left in the log. With
//!   [`JournalOptions::log_capacity`] 0 every commit is `Immediate` instead.
//!   Records nobody waits for ([`Journal::submit`]: a call's outcome) wait up to
//!   [`JournalOptions::sync_carry`] (2 ms) for one somebody does, to share its commit (one fsync per call
//!   instead of two under steady calls).
//! - [`Durability::Async`]: `append` resolves once queued (at most [`MAX_QUEUED`] wait;
//!   past that `append` waits for the writer); the writer lets a batch fill for
//!   `ASYNC_LINGER` (2 ms) after its first record, commits with redb's `Durability::None` and
//!   makes an `Immediate` commit at least every `flush` while anything is unsynced (and on
//!   [`Journal::flush`] and drop). A crash loses at most the last `flush` of records.
//!
//! A put replaces any row with the same id and moves its index entries (pending → success).
//! Several puts of one record in one batch (a call's `pending` record and its outcome) are
//! written once, as the last of them.
//! If a batch fails, each record is retried in its own transaction so one bad record does not
//! fail its neighbours. Reads (`get`, `query`, `stats`) run on the caller's thread in redb read
//! transactions; a page of 50 takes ~0.2 ms, so calling them inline from async code is fine.
//!
//! Damage: redb may panic (`unreachable!`) or report corruption when it reads a damaged page. Every
//! read and write runs under [`guard`], which turns either into
//! [`Error::Damaged`](crate::Error::Damaged) (a message pointing at `mcpproxy activity repair`); no
//! panic hook is installed. A write that hits damage fails (the proxy refuses the call: fail
//! closed) and the writer stops touching the file, answering every later write with the same error,
//! so it never waits on a transaction a panic left behind.
//!
//! A full disk or an I/O error: the journal fails closed and heals by itself. The writer enters the
//! failing state ([`Journal::health`] says why); records somebody waits for (a call's `pending`
//! record) are refused with [`Error::Unwritable`](crate::Error::Unwritable), so the call is not
//! run, while records nobody waits for are kept in memory; the writer retries with backoff,
//! re-opening redb (which refuses everything after an I/O error until re-opened) once a probe write
//! works, and writes back what the write-ahead log and memory hold (see the writer's `recovery`).
//! Readers take the database per transaction from a `DbSlot` the writer can swap.
//!
//! Compaction: redb files never shrink on their own. [`Journal::open`] compacts the file
//! when much of it is free space (see
//! [`compact_if_worthwhile`](database::compact_if_worthwhile)); a running server's file
//! therefore follows retention down at its next start (or `mcpproxy activity repair`).
//!
//! The parts:
//!
//! - `handle`: the [`Journal`] handle: open, the writer thread's start, the channel to it,
//!   the catch-up of reads, close;
//! - `options`: [`JournalOptions`], [`Durability`], the commit and fsync observers;
//! - `writes`: `append`, `upsert`, `submit`, `flush`, closing interrupted records, bulk load;
//! - `reads`: `get`, `len` and [`JournalStats`];
//! - `database`: opening the redb file, the damage [`guard`], compaction, the slot readers
//!   take the database from;
//! - `schema`: the tables, index keys, row cost and storage-key helpers;
//! - `writer`: the writer thread (group commit, syncs, checkpoints, replay, and in
//!   `writer::recovery` the failing state and the way back) and the transaction helpers;
//! - `wal`: the write-ahead log file of sync mode;
//! - `health`: `ok` or `failing` with the reason;
//! - `storage`: the write-fault seam for tests ([`WriteFaults`]), the redb backend that
//!   honours it, the recovery's probe write, I/O error texts;
//! - `tests`, `log_tests`, `crash_tests` and `failure_tests`: the unit tests, those of the
//!   write-ahead log's use, the `kill -9` crash tests, and a failing disk's.

mod database;
mod handle;
mod health;
mod options;
mod reads;
mod schema;
mod storage;
mod wal;
mod writer;
mod writes;

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod tests;

use crate::Durability;
pub(super) use database::{guard, open_database};
pub use handle::Journal;
pub(crate) use handle::{MAX_BATCH, MAX_QUEUED};
pub use health::JournalHealth;
pub use options::{CommitObserver, FsyncObserver, JournalOptions};
pub use reads::JournalStats;
pub(crate) use schema::{
    DATA_BYTES, IDX_INTENT, IDX_SERVER, IDX_STATUS, IDX_TOOL, IDX_TYPE, INDEXES, META, RECORDS,
    index_keys, key_id, key_ms, open_indexes, parse_key, row_cost,
};
pub use storage::WriteFaults;
pub use wal::DEFAULT_CAPACITY as DEFAULT_LOG_CAPACITY;
