//! The crate's error type ([`Error`]), its [`Result`], and the conversions from redb's
//! errors.

use std::path::PathBuf;

/// Errors of the activity journal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// redb failed (I/O, corruption, transaction errors).
    #[error("activity journal storage error: {0}")]
    Storage(#[from] redb::Error),
    /// A file-system operation around the database failed.
    #[error("activity journal {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An id that is not a ULID.
    #[error(
        "invalid activity id {0:?}: expected a 26-character ULID such as 01KAMXH0VBSJ2QX6F6R4VZ7P3M"
    )]
    InvalidId(String),
    /// The record could not be serialized.
    #[error("activity record {id} could not be encoded: {source}")]
    Encode {
        /// The record's id.
        id: String,
        /// The error.
        source: serde_json::Error,
    },
    /// A stored row is not a valid record.
    #[error("activity record {id} is corrupt: {source}")]
    Corrupt {
        /// The row's id.
        id: String,
        /// The error.
        source: serde_json::Error,
    },
    /// The writer thread reported a failed commit.
    #[error("activity journal write failed: {0}")]
    Write(String),
    /// A sink name the journal has no cursor for.
    #[error("no activity sink named '{0}' is registered in the journal")]
    UnknownSink(String),
    /// Another process holds the journal file (redb allows one at a time).
    #[error(
        "the activity journal {path} is in use by another process (a running `mcpproxy serve`?); \
         stop that process, or give this command the --config/--data-dir that server uses so \
         it asks the server instead of reading the file"
    )]
    Locked {
        /// The journal file.
        path: PathBuf,
    },
    /// The file is damaged: redb reported corruption or panicked reading a page.
    #[error(
        "the activity journal {path} is damaged ({detail}); run 'mcpproxy activity repair' to \
         save its readable records into a new journal"
    )]
    Damaged {
        /// The journal file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// Repair could not open the damaged file at all, even for redb's own recovery.
    #[error(
        "the activity journal {path} is too damaged to open ({detail}); nothing could be saved \
         from it. To start a new journal, stop mcpproxy and move the file aside (it is kept for \
         inspection), e.g. `mv {path} {path}.damaged`"
    )]
    Unrecoverable {
        /// The journal file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// The writer thread is gone (journal dropped or the thread died).
    #[error("activity journal writer has stopped")]
    Closed,
    /// The journal cannot write now (a full disk, a failing device): a record somebody
    /// waits for is refused until the writer has recovered, which it does by itself once
    /// writing works again.
    #[error("the activity journal cannot write ({reason})")]
    Unwritable {
        /// The error's text, as the OS describes it (`No space left on device`).
        reason: String,
    },
    /// The hash chain's signing key cannot be read or made.
    #[error(
        "the activity journal's signing key {path} is unusable: {detail}. Fix the file's \
         permissions, or move it aside to have a new key made (checkpoints signed by the old \
         key then verify only with `mcpproxy activity verify --key OLD-PUBLIC-KEY`)"
    )]
    SigningKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The signing key the config gives (`activity.signing_key`) is not one.
    #[error(
        "the activity journal's signing key from {source_name} \
         (activity.checkpoints.signing_key) is unusable: {detail}. Store a new one with \
         `openssl rand -hex 32 | mcpproxy secret set NAME` (every replica that shares it then \
         signs with the same key)"
    )]
    SigningKeySeed {
        /// Where it came from (`${secret:NAME}`).
        source_name: String,
        /// What is wrong.
        detail: String,
    },
    /// The journal has no signing key yet.
    #[error(
        "there is no activity signing key at {path} yet: it is made when the journal is first \
         opened (start `mcpproxy serve` once, or give the --config/--data-dir of the proxy \
         whose key you want)"
    )]
    NoSigningKey {
        /// Where it would be.
        path: PathBuf,
    },
    /// The journal is being re-opened after a write failure and cannot be read this moment.
    #[error(
        "the activity journal is being re-opened after a write failure ({reason}); try again \
         in a moment"
    )]
    Reopening {
        /// Why it failed.
        reason: String,
    },
}

/// Result with the journal's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::Storage(e.into())
            }
        }
    )*};
}
from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);
