//! The [`Journal`] handle: opening the journal (the redb file, the write-ahead log's replay,
//! compaction, the writer thread), its shared state, the channel to the writer, the
//! catch-up that lets a read see every write made before it, and closing it on drop.
//! Its reads are in `reads`, its writes in `writes`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use redb::Database;
use tokio::sync::Semaphore;

use super::database::{DbSlot, compact_if_worthwhile, guard, open_database_with};
use super::health::Health;
use super::schema::{INDEXES, META, RECORDS};
use super::wal::{self, WriteAheadLog};
use super::writer::{self, AppliedPuts, Command, WriterSetup, writer_loop};
use super::{Durability, JournalHealth, JournalOptions, WriteFaults};
use crate::chain::link::Chainer;
use crate::{Error, Result, outbox};

/// A test hook for the binary: while the file this variable names exists, every write of
/// the journal fails as on a full disk (see [`WriteFaults`]). Never set in normal use.
pub(crate) const WRITE_FAULT_ENV: &str = "MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE";

/// Most records committed in one transaction.
pub(crate) const MAX_BATCH: usize = 10_000;

/// Most records `append`/`upsert` let wait in the queue: past this they wait for the writer
/// (without it, Async mode under a flood queues without bound: ~1 GB in the bench).
pub(crate) const MAX_QUEUED: usize = 2 * MAX_BATCH;

/// Longest a read waits for the writer to apply the records sent before it.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// The activity journal. `Send + Sync`; share it as `Arc<Journal>`.
pub struct Journal {
    pub(super) db: Arc<DbSlot>,
    pub(crate) options: JournalOptions,
    pub(super) path: PathBuf,
    /// `Some` until drop; dropping it tells the writer to sync and stop.
    pub(super) tx: Option<Sender<Command>>,
    /// [`MAX_QUEUED`] slots bounding the queue.
    pub(super) slots: Arc<Semaphore>,
    /// Whether the writer queues finished records for sinks (see `outbox`).
    pub(crate) outbox_on: Arc<AtomicBool>,
    pub(super) writer: Option<JoinHandle<()>>,
    /// Set by retention while the journal is over its limits with only records younger than
    /// `min_age` left: new records are stored summarised (see `retention`).
    pub(crate) pressure: AtomicBool,
    /// Records the write-ahead log restored at open.
    pub(super) restored: usize,
    /// How far the writer has applied what was sent to it (reads wait for it in sync mode).
    pub(super) applied: Arc<AppliedPuts>,
    /// Whether writes work (set by the writer thread).
    pub(super) health: Arc<Health>,
    /// The hash chain's signing key and checkpoint intervals.
    pub(crate) chain: Arc<Chainer>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("durability", &self.options.durability)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens (or creates) the journal at `path`, creating the parent directory. A file left by
    /// a crash is repaired by redb here (1–2 s at 1M records), and the records its
    /// write-ahead log holds are written back (see
    /// [`restored_from_log`](Self::restored_from_log)). Starts the writer thread;
    /// retention runs only through [`run_retention`](Self::run_retention) or
    /// [`spawn_retention`](Self::spawn_retention).
    pub fn open(path: &Path, mut options: JournalOptions) -> Result<Arc<Self>> {
        if options.write_faults.is_none()
            && let Some(flag) = std::env::var_os(WRITE_FAULT_ENV)
        {
            tracing::warn!(
                "{WRITE_FAULT_ENV} is set (a test hook): the activity journal's writes fail \
                 while {} exists",
                Path::new(&flag).display()
            );
            options.write_faults = Some(WriteFaults::while_file_exists(flag.into()));
        }
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            mcpproxy_support::create_private_dir(parent).map_err(io)?;
        }
        let chain = crate::chain::link::chainer(path, &options.chain, options.replica.as_deref())?;
        let faults = options.write_faults.as_ref();
        let mut db = open_database_with(path, options.cache_bytes, faults)?;
        guard(path, || {
            let txn = db.begin_write()?;
            txn.open_table(RECORDS)?;
            for def in INDEXES {
                txn.open_table(def)?;
            }
            txn.open_table(META)?;
            txn.open_table(outbox::OUTBOX)?;
            txn.open_table(outbox::OUTBOX_KEYS)?;
            txn.open_table(outbox::SINKS)?;
            crate::chain::link::create_tables(&txn)?;
            txn.commit()?;
            Ok(())
        })?;
        let outbox_at_open = guard(path, || outbox::any_sink(&db))?;
        let (log, restored) = open_log(&db, path, &options, outbox_at_open, &chain)?;
        match compact_if_worthwhile(&mut db, path) {
            Ok(Some((before, after))) => tracing::info!(
                path = %path.display(),
                "compacted the activity journal from {before} to {after} bytes"
            ),
            Ok(None) => {}
            Err(e @ Error::Damaged { .. }) => return Err(e),
            Err(e) => tracing::warn!("activity journal compaction skipped: {e}"),
        }
        let db = Arc::new(db);
        let slot = Arc::new(DbSlot::default());
        slot.put(db.clone());
        let outbox_on = Arc::new(AtomicBool::new(outbox_at_open));
        let applied = Arc::new(AppliedPuts::default());
        let health = Arc::new(Health::default());
        let (tx, rx) = mpsc::channel();
        let writer_slot = slot.clone();
        let writer_outbox = outbox_on.clone();
        let writer_path = path.to_path_buf();
        let setup = WriterSetup {
            durability: options.durability,
            sync_carry: options.sync_carry,
            checkpoint_idle: options.checkpoint_idle,
            on_commit: options.on_commit.clone(),
            on_fsync: options.on_fsync.clone(),
            log,
            applied: applied.clone(),
            cache_bytes: options.cache_bytes,
            log_capacity: options.log_capacity,
            faults: options.write_faults.clone(),
            health: health.clone(),
            chain: chain.clone(),
        };
        let writer = std::thread::Builder::new()
            .name("activity-writer".into())
            .spawn(move || {
                if matches!(setup.durability, Durability::Async { .. }) {
                    writer::yield_to_calls();
                }
                writer_loop(db, &writer_slot, &writer_path, &rx, &writer_outbox, setup);
            })
            .map_err(io)?;
        Ok(Arc::new(Self {
            db: slot,
            options,
            path: path.to_path_buf(),
            tx: Some(tx),
            slots: Arc::new(Semaphore::new(MAX_QUEUED)),
            outbox_on,
            writer: Some(writer),
            pressure: AtomicBool::new(false),
            restored,
            applied,
            health,
            chain,
        }))
    }

    /// The redb database, unless the writer is re-opening it after a write failure
    /// ([`Error::Reopening`]). Take it per transaction; holding it keeps a failed file open.
    pub(crate) fn db(&self) -> Result<Arc<Database>> {
        self.db.get().ok_or_else(|| Error::Reopening {
            reason: self.health.reason().unwrap_or_else(|| "unknown".to_owned()),
        })
    }

    /// Whether the journal writes (`ok`), or why not (`failing`): while it fails, records
    /// somebody waits for (a call's `pending` record) are refused with
    /// [`Error::Unwritable`] and the writer retries by itself.
    pub fn health(&self) -> JournalHealth {
        self.health.show()
    }

    /// Whether writes fail now (see [`health`](Self::health)).
    pub fn is_failing(&self) -> bool {
        self.health.is_failing()
    }

    /// The error a refused write is answered with.
    pub(super) fn unwritable(&self) -> Error {
        Error::Unwritable {
            reason: self.health.reason().unwrap_or_else(|| "unknown".to_owned()),
        }
    }

    /// What a write the writer answered with `text` failed with: [`Error::Unwritable`]
    /// while the journal fails, else [`Error::Write`].
    pub(super) fn write_error(&self, text: String) -> Error {
        if self.health.is_failing() {
            self.unwritable()
        } else {
            Error::Write(text)
        }
    }

    /// How many records [`open`](Self::open) wrote back from the write-ahead log: records
    /// acknowledged before a crash that the redb file did not yet hold.
    pub fn restored_from_log(&self) -> usize {
        self.restored
    }

    /// Writes everything queued before the call into the redb file with an `Immediate`
    /// commit; in sync mode the write-ahead log then starts over, empty. Blocking (it waits
    /// for the writer thread), so from async code call it through `spawn_blocking`.
    pub fn checkpoint(&self) -> Result<()> {
        let (ack, done) = mpsc::channel();
        self.send(Command::Checkpoint(ack))?;
        match done.recv() {
            Ok(result) => result.map_err(|text| self.write_error(text)),
            Err(_) => Err(Error::Closed),
        }
    }

    /// The file this journal lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it was opened with.
    pub fn options(&self) -> &JournalOptions {
        &self.options
    }

    pub(super) fn send(&self, command: Command) -> Result<()> {
        let tx = self.tx.as_ref().ok_or(Error::Closed)?;
        if matches!(command, Command::Put(_) | Command::Record(_)) {
            self.applied.sending();
        }
        tx.send(command).map_err(|_| Error::Closed)
    }

    /// Whether retention found the journal under pressure (see `retention`): new records
    /// are stored summarised until it is not.
    pub fn under_pressure(&self) -> bool {
        self.pressure.load(Ordering::Relaxed)
    }

    /// Runs a read (or write) of the file under [`guard`], once it holds every record sent
    /// before the call ([`catch_up`](Self::catch_up)).
    /// A storage failure (a full disk) met here, outside the writer thread (retention, sink
    /// cursors, reads of a file redb closed after an I/O error), is passed to the writer,
    /// which re-opens the file and retries (see [`health`](Self::health)).
    pub(crate) fn guard<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.catch_up();
        let result = guard(&self.path, f);
        if let Err(e @ Error::Storage(_)) = &result
            && !self.health.is_failing()
            && let Some(failure) = writer::Failure::of(e)
        {
            let _ = self.send(Command::Failed(failure));
        }
        result
    }

    /// In sync mode, waits until the writer has applied to the file every record whose
    /// `append`, `upsert` or `submit` returned before this call, so a read sees them (with
    /// the write-ahead log, records are acknowledged once logged and applied a moment later;
    /// this asks the writer to apply them now). Usually well under a millisecond; gives up
    /// after 10 s with a warning. Async mode reads what is committed, as documented.
    pub(crate) fn catch_up(&self) {
        if !matches!(self.options.durability, Durability::Sync) {
            return;
        }
        let (sent, caught_up) = self.applied.caught_up();
        if caught_up || self.send(Command::Apply).is_err() {
            return;
        }
        if !self.applied.wait_for(sent, CATCH_UP_TIMEOUT) {
            tracing::warn!(
                "the activity journal's writer has not applied the latest records after {}s; \
                 reading without them",
                CATCH_UP_TIMEOUT.as_secs()
            );
        }
    }
}

/// Opens sync mode's write-ahead log beside `path` and replays what it holds into `db`. A
/// log is replayed in either mode (an async-mode start after a sync-mode crash replays it,
/// then removes the file). Returns the log to append to (sync mode with a `log_capacity`,
/// unless the file cannot be created: then every commit is `Immediate`) and how many records
/// the replay wrote.
fn open_log(
    db: &Database,
    path: &Path,
    options: &JournalOptions,
    outbox: bool,
    chain: &Chainer,
) -> Result<(Option<WriteAheadLog>, usize)> {
    let log_path = wal::path_for(path);
    let io = |source| Error::Io {
        path: log_path.clone(),
        source,
    };
    let wanted = options.durability == Durability::Sync && options.log_capacity > 0;
    let existed = log_path.exists();
    if !wanted && !existed {
        return Ok((None, 0));
    }
    let (mut log, payloads) = match WriteAheadLog::open(&log_path, options.log_capacity) {
        Ok(opened) => opened,
        Err(e) if !existed => {
            tracing::warn!(
                log = %log_path.display(),
                "cannot create the activity write-ahead log ({e}); every record in sync mode \
                 costs a full journal commit"
            );
            return Ok((None, 0));
        }
        Err(e) => return Err(io(e)),
    };
    let restored = guard(path, || writer::replay(db, payloads, outbox, chain))?;
    if restored > 0 {
        tracing::info!(
            log = %log_path.display(),
            "restored {restored} activity records from the write-ahead log"
        );
    }
    if wanted {
        log.faults = options.write_faults.clone();
        log.start_over().map_err(io)?;
        #[cfg(test)]
        {
            log.failing = options.failing_log.clone();
        }
        Ok((Some(log), restored))
    } else {
        drop(log);
        std::fs::remove_file(&log_path).map_err(io)?;
        Ok((None, restored))
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Closing the channel makes the writer drain what is queued, sync and stop.
        drop(self.tx.take());
        if let Some(writer) = self.writer.take()
            && writer.join().is_err()
        {
            tracing::error!("activity journal writer thread panicked");
        }
    }
}
