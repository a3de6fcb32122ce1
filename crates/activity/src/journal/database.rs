//! The redb file under the journal: opening it (telling a locked file from a damaged one),
//! the [`guard`] that turns redb's panics and corruption errors into [`Error::Damaged`],
//! compaction at open, and the [`DbSlot`] readers take the database from while the writer
//! may swap it.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use redb::{Database, ReadableDatabase};

use super::schema::{DATA_BYTES, META};
use super::storage::{self, WriteFaults};
use crate::{Error, Result};

/// The open redb database, shared by the writer thread and the readers. Empty while the
/// writer re-opens it after a write failure (redb refuses every operation after an I/O
/// error until the file is closed and opened again).
#[derive(Debug, Default)]
pub(crate) struct DbSlot(RwLock<Option<Arc<Database>>>);

impl DbSlot {
    fn lock_read(&self) -> std::sync::RwLockReadGuard<'_, Option<Arc<Database>>> {
        mcpproxy_support::read_lock(&self.0)
    }

    fn lock_write(&self) -> std::sync::RwLockWriteGuard<'_, Option<Arc<Database>>> {
        mcpproxy_support::write_lock(&self.0)
    }

    /// The database, unless it is being re-opened.
    pub(crate) fn get(&self) -> Option<Arc<Database>> {
        self.lock_read().clone()
    }

    /// Takes the database out (readers see none until [`put`](Self::put)).
    pub(crate) fn take(&self) -> Option<Arc<Database>> {
        self.lock_write().take()
    }

    /// Puts a (re-)opened database in.
    pub(crate) fn put(&self, db: Arc<Database>) {
        *self.lock_write() = Some(db);
    }
}

/// Opens the redb file, telling a file another process holds ([`Error::Locked`]) from a
/// damaged one ([`Error::Damaged`]) and from an I/O failure ([`Error::Io`]).
pub(crate) fn open_database(path: &Path, cache_bytes: usize) -> Result<Database> {
    open_database_with(path, cache_bytes, None)
}

/// [`open_database`], its writes failing while `faults` are on.
pub(crate) fn open_database_with(
    path: &Path,
    cache_bytes: usize,
    faults: Option<&WriteFaults>,
) -> Result<Database> {
    let shown = path.display().to_string();
    let repair_logged = AtomicBool::new(false);
    let mut builder = Database::builder();
    builder
        .set_cache_size(cache_bytes)
        .set_repair_callback(move |_session| {
            if !repair_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(path = %shown, "activity journal was not closed cleanly; repairing");
            }
        });
    // redb creates a missing file with the umask's mode: made (or narrowed to) 0600 first.
    mcpproxy_support::prepare_private_file(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let opened = std::panic::catch_unwind(AssertUnwindSafe(|| match faults {
        None => builder.create(path),
        Some(faults) => storage::FaultyBackend::open(path, faults.clone())
            .map_err(redb::DatabaseError::from)
            .and_then(|backend| builder.create_with_backend(backend)),
    }));
    let damaged = |detail: String| Error::Damaged {
        path: path.to_path_buf(),
        detail,
    };
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(redb::DatabaseError::DatabaseAlreadyOpen)) => Err(Error::Locked {
            path: path.to_path_buf(),
        }),
        Ok(Err(redb::DatabaseError::Storage(redb::StorageError::Io(source)))) => Err(Error::Io {
            path: path.to_path_buf(),
            source,
        }),
        Ok(Err(
            e @ (redb::DatabaseError::RepairAborted
            | redb::DatabaseError::Storage(redb::StorageError::Corrupted(_))),
        )) => Err(damaged(e.to_string())),
        Ok(Err(e)) => Err(e.into()),
        Err(panic) => Err(damaged(panic_text(panic.as_ref()))),
    }
}

/// Runs `f` (a transaction on the journal at `path`), turning a panic inside redb and a
/// corruption error into [`Error::Damaged`]. redb panics on some damaged pages instead of
/// returning an error; the transaction is dropped while unwinding, so nothing stays held.
pub(crate) fn guard<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let damaged = |detail: String| Error::Damaged {
        path: path.to_path_buf(),
        detail,
    };
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Err(Error::Storage(redb::Error::Corrupted(detail)))) => Err(damaged(detail)),
        Ok(Err(Error::Storage(e @ redb::Error::LockPoisoned(_)))) => Err(damaged(format!(
            "an earlier read failed and left it unusable: {e}"
        ))),
        Ok(result) => result,
        Err(panic) => Err(damaged(panic_text(panic.as_ref()))),
    }
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown failure".to_owned());
    format!("reading a page failed: {text}")
}

/// Free space worth giving back: more than this, or more than a quarter of the file.
const COMPACT_FREE_BYTES: u64 = 64 << 20;

/// Files smaller than this are never compacted (not worth the rewrite). A new, empty
/// journal is about 1 MiB of preallocated pages: not compacted (and not logged) at every
/// open of a fresh data dir.
const COMPACT_MIN_FILE: u64 = 4 << 20;

/// Compacts `db` when a large part of its file is free space: more than
/// [`COMPACT_FREE_BYTES`] or a quarter of the file (files under [`COMPACT_MIN_FILE`] are
/// left alone). Needs the only handle on the database with no transaction open, hence only
/// at open. Returns the file size before and after, when it compacted.
pub(crate) fn compact_if_worthwhile(db: &mut Database, path: &Path) -> Result<Option<(u64, u64)>> {
    let file_len = |path: &Path| {
        std::fs::metadata(path)
            .map(|m| m.len())
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })
    };
    let before = file_len(path)?;
    if before < COMPACT_MIN_FILE {
        return Ok(None);
    }
    // Cheap first look: the logical data against the file; the page walk only if it may pay.
    let data_bytes = guard(path, || {
        let txn = db.begin_read()?;
        Ok(txn
            .open_table(META)?
            .get(DATA_BYTES)?
            .map_or(0, |g| g.value()))
    })?;
    if data_bytes.saturating_mul(4) / 3 >= before {
        return Ok(None);
    }
    let free = guard(path, || {
        let txn = db.begin_write()?;
        let stats = txn.stats()?;
        txn.abort()?;
        Ok(stats.fragmented_bytes())
    })?;
    if free < COMPACT_FREE_BYTES && free.saturating_mul(4) < before {
        return Ok(None);
    }
    guard(path, || {
        db.compact()
            .map_err(|e| Error::Write(format!("compaction failed: {e}")))
    })?;
    Ok(Some((before, file_len(path)?)))
}
