//! The journal's file operations where they can fail: the write-fault seam
//! ([`WriteFaults`]) that tests use to make the disk fail, the redb storage backend that
//! honours it, the probe write the writer makes before it re-opens a failed journal, and the
//! text an I/O error is reported with.
//!
//! Without faults (every production run) redb gets its own file backend, unchanged. With
//! them, [`FaultyBackend`] wraps that same backend (locks included) and fails `write`,
//! `set_len` and `sync_data` with `ENOSPC` while the faults are on, exactly as a full disk
//! fails them; the write-ahead log and the probe check the same switch before they write.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::StorageBackend;
use redb::backends::FileBackend;

/// A switch that makes the journal's writes fail as a full disk does (`ENOSPC`): every
/// write, resize and fsync of the redb file, of the write-ahead log and of the writer's
/// probe. Reads are not affected. For tests (the unit tests flip it; `mcpproxy serve` arms
/// one from `MCPPROXY_TEST_JOURNAL_WRITE_FAULT_FILE`), never set in normal use.
#[derive(Clone, Debug)]
pub struct WriteFaults(Arc<Trigger>);

#[derive(Debug)]
enum Trigger {
    /// On while set.
    Flag(AtomicBool),
    /// On while this file exists.
    File(PathBuf),
}

impl WriteFaults {
    /// A switch that starts off; [`set`](Self::set) turns it on and off.
    pub fn switch() -> Self {
        Self(Arc::new(Trigger::Flag(AtomicBool::new(false))))
    }

    /// Faults on while the file at `path` exists (another process, such as a test, creates
    /// and removes it).
    pub fn while_file_exists(path: PathBuf) -> Self {
        Self(Arc::new(Trigger::File(path)))
    }

    /// Turns a [`switch`](Self::switch) on or off (no effect on a file trigger).
    pub fn set(&self, on: bool) {
        if let Trigger::Flag(flag) = self.0.as_ref() {
            flag.store(on, Ordering::SeqCst);
        }
    }

    /// Whether writes fail now.
    pub fn on(&self) -> bool {
        match self.0.as_ref() {
            Trigger::Flag(flag) => flag.load(Ordering::SeqCst),
            Trigger::File(path) => path.exists(),
        }
    }

    /// `Err(ENOSPC)` while the faults are on.
    pub(super) fn check(&self) -> io::Result<()> {
        if self.on() {
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        } else {
            Ok(())
        }
    }
}

/// `Err(ENOSPC)` when `faults` are given and on.
pub(super) fn check(faults: Option<&WriteFaults>) -> io::Result<()> {
    faults.map_or(Ok(()), WriteFaults::check)
}

/// redb's file backend with [`WriteFaults`] in front of its writes.
#[derive(Debug)]
pub(super) struct FaultyBackend {
    inner: FileBackend,
    faults: WriteFaults,
}

impl FaultyBackend {
    /// The backend of `file` (opened read-write, created if missing).
    pub(super) fn open(path: &Path, faults: WriteFaults) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let inner = FileBackend::new(file).map_err(io::Error::other)?;
        Ok(Self { inner, faults })
    }
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.faults.check()?;
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.faults.check()?;
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.faults.check()?;
        self.inner.write(offset, data)
    }

    fn close(&self) -> io::Result<()> {
        self.inner.close()
    }

    fn try_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), redb::BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.query_lock_range(start, end)
    }
}

/// Bytes the probe writes: a few pages, so a disk with only a sliver left fails it.
const PROBE_BYTES: usize = 64 << 10;

/// Whether the journal's directory takes writes again: writes [`PROBE_BYTES`] to a scratch
/// file beside `journal` (`activity.redb-probe`), fsyncs and removes it. The writer runs it
/// before it re-opens a journal whose writes failed, so it does not close and re-open redb
/// (and make readers wait) while the disk is still full.
pub(super) fn probe(journal: &Path, faults: Option<&WriteFaults>) -> io::Result<()> {
    let mut name = journal.as_os_str().to_owned();
    name.push("-probe");
    let path = PathBuf::from(name);
    let result = (|| {
        check(faults)?;
        let mut file = File::create(&path)?;
        file.write_all(&[0u8; PROBE_BYTES])?;
        file.sync_data()
    })();
    // Whatever happened, the scratch file goes (on a full disk it frees what it took).
    let _ = std::fs::remove_file(&path);
    result
}

/// What an I/O error says, without Rust's ` (os error N)` suffix: `No space left on
/// device`, as the OS describes it.
pub(crate) fn describe(error: &io::Error) -> String {
    let text = error.to_string();
    match error.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .map_or_else(|| text.clone(), str::to_owned),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_os_error_is_described_as_the_os_says() {
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(describe(&full), "No space left on device");
        assert_eq!(describe(&io::Error::other("odd")), "odd");
    }

    #[test]
    fn the_probe_fails_while_faults_are_on_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("activity.redb");
        let faults = WriteFaults::switch();
        probe(&journal, Some(&faults)).unwrap();
        faults.set(true);
        let e = probe(&journal, Some(&faults)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        faults.set(false);
        probe(&journal, Some(&faults)).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_trigger_is_on_while_the_file_exists() {
        let dir = tempfile::tempdir().unwrap();
        let flag = dir.path().join("fault");
        let faults = WriteFaults::while_file_exists(flag.clone());
        assert!(!faults.on());
        std::fs::write(&flag, "").unwrap();
        assert!(faults.on());
        assert!(faults.check().is_err());
    }
}
