//! The writer's fsyncs: noting commits and fsyncs (and telling the observer), the
//! `Immediate` commit that persists earlier ones, the write-ahead log's frames and fsync,
//! checkpoints (the log folded into the file and started over), and giving up a log that
//! cannot be written.

use std::path::Path;
use std::time::Instant;

use super::messages::Put;
use super::thread::Writer;
use super::transactions::sync;
use crate::Result;
use crate::journal::wal::{self, WriteAheadLog};

impl Writer<'_> {
    /// Tells the observer of an fsync.
    pub(super) fn fsynced(&self) {
        if let Some(observer) = &self.setup.on_fsync {
            (observer.0)();
        }
    }

    /// Notes a successful commit (an `Immediate` one is an fsync; a `None` one without a log
    /// opens Async mode's unsynced window).
    pub(super) fn committed(&mut self, durability: redb::Durability) {
        if matches!(durability, redb::Durability::Immediate) {
            self.fsynced();
            self.synced();
        } else if self.setup.log.is_none() {
            self.unsynced_since.get_or_insert_with(Instant::now);
        }
    }

    /// Everything committed so far is durable: the records kept until then go, and so does
    /// an abandoned log whose records the file now holds.
    pub(super) fn synced(&mut self) {
        self.unsynced_since = None;
        self.unsynced.clear();
        if self.unapplied.is_empty()
            && let Some(path) = self.abandoned_log.take()
        {
            remove_abandoned_log(&path);
        }
    }

    /// After a failed batch: makes what did commit durable as the batch would have.
    pub(super) fn settle_after_failure(&mut self, durability: redb::Durability) -> Result<()> {
        if matches!(durability, redb::Durability::Immediate) {
            self.sync_commits()
        } else {
            Ok(())
        }
    }

    /// An empty `Immediate` commit: persists every `None` commit before it.
    pub(super) fn sync_commits(&mut self) -> Result<()> {
        match self.db_op(sync) {
            Ok(()) => {
                self.fsynced();
                self.synced();
                Ok(())
            }
            Err(e) => {
                tracing::error!("activity journal fsync failed: {e}");
                Err(e)
            }
        }
    }

    /// Writes `puts`' frames to the log (no fsync yet); whether it did. A batch the log
    /// cannot take is left to the caller's checkpoint; a log that fails to write is given up
    /// (the journal goes on with `Immediate` commits).
    pub(super) fn write_frames(&mut self, puts: &[&Put]) -> bool {
        let Some(wal) = self.setup.log.as_mut() else {
            return false;
        };
        let bytes = puts.iter().map(|p| wal::frame_len(p.json.len())).sum();
        if !wal.fits(bytes) {
            return false;
        }
        match wal.write(puts.iter().map(|p| p.json.as_slice())) {
            Ok(()) => {
                self.log_unsynced_since.get_or_insert_with(Instant::now);
                true
            }
            Err(e) => {
                self.give_up_log(&e);
                false
            }
        }
    }

    /// Fsyncs the log's unsynced frames (waiting for an fsync already started). If that
    /// fails, the log is given up and an `Immediate` commit makes the records durable.
    pub(super) fn sync_log(&mut self) -> Result<()> {
        let Some(wal) = self.setup.log.as_mut() else {
            return self.sync_commits();
        };
        match wal.sync() {
            Ok(()) => {
                self.fsynced();
                self.log_unsynced_since = None;
                Ok(())
            }
            Err(e) => {
                self.give_up_log(&e);
                self.apply()?;
                self.sync_commits()
            }
        }
    }

    /// An `Immediate` commit (persisting every `None` commit before it), then the log, whose
    /// records that commit holds, starts over.
    pub(super) fn checkpoint(&mut self) -> Result<()> {
        if self.failing.is_some() {
            return Err(self.unwritable());
        }
        self.apply()?;
        self.sync_commits().inspect_err(|e| {
            tracing::error!("activity journal checkpoint failed: {e}");
        })?;
        self.log_unsynced_since = None;
        match self.setup.log.as_mut().map(WriteAheadLog::start_over) {
            Some(Ok(())) => self.fsynced(),
            Some(Err(e)) => {
                self.give_up_log(&e);
                // Everything it held is durable in the file: it goes now.
                self.synced();
            }
            None => {}
        }
        Ok(())
    }

    /// Stops using the log. The journal goes on with `Immediate` commits; the caller makes
    /// what only the log held durable, and the file is removed once a full commit has (its
    /// frames must not be replayed over newer rows at a later start, nor lost before).
    pub(super) fn give_up_log(&mut self, e: &std::io::Error) {
        self.log_unsynced_since = None;
        let Some(wal) = self.setup.log.take() else {
            return;
        };
        tracing::error!(
            log = %wal.path().display(),
            "the activity write-ahead log cannot be written ({e}); committing records \
             straight to the journal file from now on"
        );
        self.abandoned_log = Some(wal.path().to_path_buf());
    }
}

/// Removes a write-ahead log given up once the redb file holds all it held.
pub(super) fn remove_abandoned_log(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::error!(
            log = %path.display(),
            "cannot remove the abandoned activity write-ahead log ({e}); remove it before \
             the next start, or it may restore older versions of the newest records"
        );
    }
}
