//! The activity journal: a durable, queryable audit log of every tool call through the proxy.
//!
//! - [`record`]: the [`ActivityRecord`] (its JSON is the REST API's), ids, timestamps and the
//!   argument cap/redaction;
//! - [`journal`]: the redb-backed [`Journal`] with one writer thread doing group commit (the
//!   handle, its options, reads and writes, the redb file, the writer thread, sync mode's
//!   write-ahead log);
//! - [`query`]: indexed, newest-first, filtered paging ([`Filter`], [`Page`]);
//! - [`stats`]: call statistics over a window of the journal ([`CallStats`]);
//! - [`export`]: the export formats, JSON Lines and CSV ([`ExportFormat`]);
//! - [`outbox`]: per-sink cursors over finished records, in commit order, for delivery;
//! - [`batch`]: what a sink is handed, the records' stored JSON ([`SinkBatch`]);
//! - [`retention`]: deletion by age / count / size, held back by undelivered records and, for
//!   size and count, by `min_age`; pressure mode (summarised records) and its `alert` record;
//! - [`repair`]: copying the readable records of a damaged journal into a new file;
//! - [`delivery`]: the [`Sink`] trait and the background tasks ([`Delivery`]) that feed the
//!   outbox to sinks;
//! - [`chain`]: the hash chain that makes the journal tamper-evident (`seq`, `prev`, `hash`
//!   on every final record), its signed checkpoints and `verify` ([`ChainReport`]);
//! - [`error`]: the crate's [`Error`] and [`Result`].
//!
//! The record is built from the policy's own types ([`mcpproxy_policy`]); the journal's
//! files are made private to their owner with `mcpproxy_support`'s helpers.
//!
//! Storage layout (one redb file): `activity` maps the 16 ULID bytes (so key order is time
//! order) to the record's JSON; five index tables map `(key, ulid)` to `()` for intent type,
//! server, `server:tool`, status and record type; `activity_meta` holds the logical data size
//! and the last outbox number; `activity_outbox`, `activity_outbox_keys` and `activity_sinks`
//! are the sinks' outbox and cursors.

mod batch;
mod chain;
mod delivery;
mod error;
mod export;
mod journal;
mod outbox;
mod query;
mod record;
mod repair;
mod retention;
mod stats;

pub use batch::{SinkBatch, StoredRecord};
pub use chain::{
    ChainLink, ChainOptions, ChainReport, ChainState, Checkpoint, KEY_FILE, KeySeed, Problem,
    ProblemKind, SigningKey, Verifier, canonical, canonical_sha256, linked_record_hash,
    public_key_of, read_witness, record_hash, verify_export, verify_export_with,
};
pub use delivery::{Activity, Delivery, Failure, Live, Sink, SinkReport, offline_report};
pub use error::{Error, Result};
pub use export::ExportFormat;
pub use journal::{
    CommitObserver, DEFAULT_LOG_CAPACITY, FsyncObserver, Journal, JournalHealth, JournalOptions,
    JournalStats, WriteFaults,
};
pub use outbox::{SinkState, SinkStatus};
pub use query::SCAN_CHUNK;
pub use query::{Filter, Page};
pub use record::{
    ActivityRecord, ApprovalRecord, ClientRecord, IdentityRecord, MAX_NAME_BYTES, MAX_TEXT_BYTES,
    RecordType, Source, Status, cap_arguments, format_timestamp, new_id, now_ms, parse_record_id,
    parse_timestamp,
};
pub use repair::RepairReport;
pub use stats::{CallStats, Group, StatsTally};

// The settings the journal obeys are the vocabulary's, so that the config reads them
// without the journal; they are part of this crate's API.
pub use mcpproxy_policy::journal::{DeliveryOptions, Durability, Retention};

#[cfg(test)]
pub(crate) mod test_util;
