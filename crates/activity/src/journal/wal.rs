//! The write-ahead log of `durability: sync`: the file that makes an acknowledged record
//! durable with an fsync of one or two pages instead of a redb commit's twenty.
//!
//! A redb `Immediate` commit rewrites and fsyncs every page the transaction touched: the
//! record's leaf, five index leaves, the meta and outbox tables and the B-tree paths above
//! them, about twenty pages, ~0.5 ms on this project's machines. In sync mode the writer
//! instead appends a batch's rows to this log and fsyncs it (`fdatasync` of the pages just
//! written: the file is preallocated, so its size never changes and no metadata goes with
//! them), acknowledges, and applies the rows to redb with `Durability::None` a moment later.
//! Now and then it *checkpoints*: an `Immediate` redb commit persists everything before it,
//! and the log starts over. On open the journal replays the log into redb (see
//! `Journal::open`).
//!
//! The file: a 4 KiB head holding two header slots, then frames up to its capacity.
//!
//! - A header slot (at 0 and at 512) is `MAGIC`, the generation (u64 LE) and a CRC-32 of
//!   both. Starting over writes the next generation into the other slot and fsyncs it, so a
//!   torn header write leaves the previous slot, and its generation, in force.
//! - A frame is its payload's length (u32 LE), a CRC-32 of the generation, the length and the
//!   payload (u32 LE), the generation (u64 LE), then the payload (one record's stored JSON).
//!
//! Writing frames and fsyncing them are separate steps. The writer writes the frames of a
//! batch nobody waits for (a call's outcome) without an fsync: the next fsync, for a batch
//! somebody waits for or at most 2 ms later, covers them.
//!
//! Reading stops at the first frame that is not whole, not of the current generation or
//! fails its CRC: frames left over from earlier generations, a torn last append and the
//! zeros of the preallocation all end the log. Every frame before the last completed fsync
//! is whole, so what stopping early can lose is only frames written after it, which nobody
//! was told were durable. (Open always starts a new generation after reading, so frames
//! past the point where reading stopped never count later.)

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::storage::{self, WriteFaults};

/// The first bytes of a header slot; the last byte is the format version.
const MAGIC: [u8; 8] = *b"MCPPWAL\x01";
/// Where the two header slots start.
const SLOTS: [u64; 2] = [0, 512];
/// Bytes of a header slot: magic, generation, CRC.
const SLOT_BYTES: usize = 8 + 8 + 4;
/// Where the first frame starts (the head is one page).
const FRAMES_START: u64 = 4096;
/// Bytes in front of each frame's payload: length, CRC, generation.
const FRAME_HEADER: usize = 4 + 4 + 8;
/// Default size of the log file, preallocated: about 5,000 calls' records between
/// checkpoints.
pub const DEFAULT_CAPACITY: u64 = 8 << 20;
/// Smallest capacity a log is given (a smaller setting is raised to this).
const MIN_CAPACITY: u64 = 64 << 10;

/// The log file of the journal at `journal` (`activity.redb` → `activity.redb-wal`).
pub(super) fn path_for(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// The bytes a frame with a `payload_len`-byte payload takes in the log.
pub(super) fn frame_len(payload_len: usize) -> u64 {
    (FRAME_HEADER + payload_len) as u64
}

/// The log's file: in tests, one that counts its fsyncs ([`CountingFile`]).
#[cfg(not(test))]
type LogFile = File;
#[cfg(test)]
type LogFile = CountingFile;

/// In tests, the log's file: a [`File`] whose `sync_data` and `sync_all` count the fsyncs
/// they make, so a test can tell that the log fsyncs (reading the file back goes through
/// the page cache, and would show frames that were never fsync'd).
#[cfg(test)]
#[derive(Debug)]
struct CountingFile {
    file: File,
    fsyncs: std::sync::atomic::AtomicU64,
}

#[cfg(test)]
impl CountingFile {
    fn new(file: File) -> Self {
        Self {
            file,
            fsyncs: Default::default(),
        }
    }

    /// The fsyncs made so far.
    fn fsyncs(&self) -> u64 {
        self.fsyncs.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()?;
        self.fsyncs
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()?;
        self.fsyncs
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
impl std::ops::Deref for CountingFile {
    type Target = File;

    fn deref(&self) -> &File {
        &self.file
    }
}

/// An open write-ahead log (see the module docs). Owned by the journal's writer thread.
#[derive(Debug)]
pub(super) struct WriteAheadLog {
    file: LogFile,
    path: PathBuf,
    generation: u64,
    /// Where the next frame goes.
    end: u64,
    /// Size of the file; frames never go past it.
    capacity: u64,
    /// Reused to gather a batch's frames into one write.
    buf: Vec<u8>,
    /// Fault injection (tests): while on, writes and fsyncs fail as on a full disk.
    pub(super) faults: Option<WriteFaults>,
    /// Test hook: while set, fsyncs fail as a failing disk's would.
    #[cfg(test)]
    pub(super) failing: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl WriteAheadLog {
    /// Opens the log at `path`, creating and preallocating it (`capacity` bytes, at least
    /// 64 KiB) if it does not exist, and returns it with the payloads of its current
    /// generation, in the order they were appended. The caller replays those and then calls
    /// [`start_over`](Self::start_over) before appending.
    pub(super) fn open(path: &Path, capacity: u64) -> io::Result<(Self, Vec<Vec<u8>>)> {
        let capacity = capacity.max(MIN_CAPACITY);
        let existed = path.exists();
        // The records' arguments are the user's: only the user reads them (0600, and a file
        // left wider is narrowed).
        let file = mcpproxy_support::open_private(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
            path,
        )?;
        #[cfg(test)]
        let file = CountingFile::new(file);
        let mut log = Self {
            file,
            path: path.to_path_buf(),
            generation: 0,
            end: FRAMES_START,
            capacity,
            buf: Vec::new(),
            faults: None,
            #[cfg(test)]
            failing: None,
        };
        let payloads = if existed {
            let bytes = std::fs::read(path)?;
            log.generation = current_generation(&bytes).unwrap_or(0);
            let (payloads, end) = read_frames(&bytes, log.generation);
            log.end = end;
            payloads
        } else {
            Vec::new()
        };
        log.preallocate()?;
        if !existed {
            log.write_slot(log.generation)?;
            log.file.sync_all()?;
            sync_parent(path)?;
        }
        Ok((log, payloads))
    }

    /// The file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether frames of `bytes` in all fit after what the log holds.
    pub(super) fn fits(&self, bytes: u64) -> bool {
        self.end.saturating_add(bytes) <= self.capacity
    }

    /// Whether the log holds no frame of its generation.
    pub(super) fn is_empty(&self) -> bool {
        self.end == FRAMES_START
    }

    /// [`write`](Self::write), then [`sync`](Self::sync).
    #[cfg(test)]
    pub(super) fn append<'a>(
        &mut self,
        payloads: impl Iterator<Item = &'a [u8]>,
    ) -> io::Result<()> {
        self.write(payloads)?;
        self.sync()
    }

    /// Writes one frame per payload in a single write, not yet fsync'd: a later
    /// [`sync`](Self::sync) covers it with every frame before it. A batch that does not fit is
    /// refused with `StorageFull` and nothing is written.
    pub(super) fn write<'a>(&mut self, payloads: impl Iterator<Item = &'a [u8]>) -> io::Result<()> {
        self.buf.clear();
        for payload in payloads {
            let len = u32::try_from(payload.len())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
            let mut crc = crc32fast::Hasher::new();
            crc.update(&self.generation.to_le_bytes());
            crc.update(&len.to_le_bytes());
            crc.update(payload);
            self.buf.extend_from_slice(&len.to_le_bytes());
            self.buf.extend_from_slice(&crc.finalize().to_le_bytes());
            self.buf.extend_from_slice(&self.generation.to_le_bytes());
            self.buf.extend_from_slice(payload);
        }
        if !self.fits(self.buf.len() as u64) {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                "the batch does not fit in the write-ahead log",
            ));
        }
        storage::check(self.faults.as_ref())?;
        self.file.write_all_at(&self.buf, self.end)?;
        self.end += self.buf.len() as u64;
        // A flood's batch can be megabytes: do not keep that much for good.
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Fsyncs everything written so far (`fdatasync`: the file's size never changes, so
    /// only the pages written go to the disk).
    pub(super) fn sync(&mut self) -> io::Result<()> {
        #[cfg(test)]
        if self
            .failing
            .as_ref()
            .is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
        {
            return Err(io::Error::other("injected fsync failure"));
        }
        storage::check(self.faults.as_ref())?;
        self.file.sync_data()
    }

    /// Starts the log over, empty: the next generation goes into the other header slot and is
    /// fsync'd, which retires every frame written so far. Call it only once everything in the
    /// log is durable elsewhere (after an `Immediate` redb commit).
    pub(super) fn start_over(&mut self) -> io::Result<()> {
        let next = self.generation.wrapping_add(1);
        storage::check(self.faults.as_ref())?;
        self.write_slot(next)?;
        self.file.sync_data()?;
        self.generation = next;
        self.end = FRAMES_START;
        Ok(())
    }

    /// Writes the header slot of `generation`.
    fn write_slot(&self, generation: u64) -> io::Result<()> {
        let mut slot = [0u8; SLOT_BYTES];
        slot[..8].copy_from_slice(&MAGIC);
        slot[8..16].copy_from_slice(&generation.to_le_bytes());
        let crc = crc32fast::hash(&slot[..16]);
        slot[16..].copy_from_slice(&crc.to_le_bytes());
        self.file
            .write_all_at(&slot, SLOTS[(generation % 2) as usize])
    }

    /// Fills the file with zeros up to its capacity (a file that is already longer keeps its
    /// length), so later appends never change its size.
    fn preallocate(&mut self) -> io::Result<()> {
        let len = self.file.metadata()?.len();
        if len >= self.capacity {
            self.capacity = len;
            return Ok(());
        }
        let zeros = vec![0u8; 1 << 20];
        let mut at = len;
        while at < self.capacity {
            let n = (self.capacity - at).min(zeros.len() as u64) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.file.sync_all()
    }
}

/// The payloads of the current generation of the log at `path`, as a replay would read them.
pub(super) fn read(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let bytes = std::fs::read(path)?;
    Ok(read_frames(&bytes, current_generation(&bytes).unwrap_or(0)).0)
}

/// The generation of the newest valid header slot in `bytes`, if any.
fn current_generation(bytes: &[u8]) -> Option<u64> {
    SLOTS
        .iter()
        .filter_map(|&at| {
            let slot = bytes.get(at as usize..at as usize + SLOT_BYTES)?;
            (slot[..8] == MAGIC && crc32fast::hash(&slot[..16]) == le_u32(&slot[16..20]))
                .then(|| le_u64(&slot[8..16]))
        })
        .max()
}

/// The payloads of the frames of `generation` from [`FRAMES_START`] on, and where the first
/// frame that is not one of them starts.
fn read_frames(bytes: &[u8], generation: u64) -> (Vec<Vec<u8>>, u64) {
    let mut payloads = Vec::new();
    let mut at = FRAMES_START as usize;
    while let Some(header) = bytes.get(at..at + FRAME_HEADER) {
        let len = le_u32(&header[0..4]);
        let crc = le_u32(&header[4..8]);
        let frame_generation = le_u64(&header[8..16]);
        if len == 0 || frame_generation != generation {
            break;
        }
        let start = at + FRAME_HEADER;
        let Some(payload) = bytes.get(start..start + len as usize) else {
            break;
        };
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&generation.to_le_bytes());
        hasher.update(&len.to_le_bytes());
        hasher.update(payload);
        if hasher.finalize() != crc {
            break;
        }
        payloads.push(payload.to_vec());
        at = start + len as usize;
    }
    (payloads, at as u64)
}

/// A little-endian u32 from the first 4 bytes of `bytes` (zero-padded if shorter).
fn le_u32(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    let n = bytes.len().min(4);
    word[..n].copy_from_slice(&bytes[..n]);
    u32::from_le_bytes(word)
}

/// A little-endian u64 from the first 8 bytes of `bytes` (zero-padded if shorter).
fn le_u64(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    u64::from_le_bytes(word)
}

/// Fsyncs the directory holding `path`, so a newly created file's name survives power loss.
fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => File::open(dir)?.sync_all(),
        None => File::open(".")?.sync_all(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &Path) -> (WriteAheadLog, Vec<Vec<u8>>) {
        WriteAheadLog::open(path, MIN_CAPACITY).unwrap()
    }

    fn append(log: &mut WriteAheadLog, payloads: &[&str]) {
        log.append(payloads.iter().map(|p| p.as_bytes())).unwrap();
    }

    fn texts(payloads: &[Vec<u8>]) -> Vec<String> {
        payloads
            .iter()
            .map(|p| String::from_utf8(p.clone()).unwrap())
            .collect()
    }

    #[test]
    fn a_new_log_is_preallocated_and_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(&dir.path().join("activity.redb"));
        assert!(path.ends_with("activity.redb-wal"));
        let (log, payloads) = open(&path);
        assert!(payloads.is_empty() && log.is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), MIN_CAPACITY);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn appended_frames_come_back_in_order_after_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j-wal");
        let (mut log, _) = open(&path);
        append(&mut log, &["one", "two"]);
        append(&mut log, &["three"]);
        let len = std::fs::metadata(&path).unwrap().len();
        drop(log);
        let (log, payloads) = open(&path);
        assert_eq!(texts(&payloads), ["one", "two", "three"]);
        assert!(!log.is_empty());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len,
            "appends never grow the file"
        );
    }

    #[test]
    fn starting_over_retires_every_earlier_frame_and_the_next_ones_replace_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j-wal");
        let (mut log, _) = open(&path);
        append(&mut log, &["old-1", "old-2", "old-3"]);
        log.start_over().unwrap();
        assert!(log.is_empty());
        drop(log);
        let (mut log, payloads) = open(&path);
        assert!(payloads.is_empty(), "{:?}", texts(&payloads));
        // A shorter frame over the old ones: the old frame after it must not come back.
        append(&mut log, &["new"]);
        drop(log);
        assert_eq!(texts(&open(&path).1), ["new"]);
    }

    #[test]
    fn a_torn_or_damaged_last_append_ends_the_log_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j-wal");
        let (mut log, _) = open(&path);
        append(&mut log, &["kept"]);
        let second = log.end;
        append(&mut log, &["torn-payload"]);
        drop(log);
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        // Half of the second frame's payload never reached the disk.
        file.write_all_at(b"\0\0\0\0\0\0", second + FRAME_HEADER as u64 + 6)
            .unwrap();
        let (log, payloads) = open(&path);
        assert_eq!(texts(&payloads), ["kept"]);
        assert_eq!(log.end, second, "the next append overwrites the torn frame");
        // One flipped bit in the first frame: nothing is read past it.
        file.write_all_at(b"K", FRAMES_START + FRAME_HEADER as u64)
            .unwrap();
        assert!(open(&path).1.is_empty());
    }

    #[test]
    fn a_torn_header_write_leaves_the_previous_generation_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j-wal");
        let (mut log, _) = open(&path);
        log.start_over().unwrap();
        append(&mut log, &["after-checkpoint"]);
        // The next start-over's header write is torn: its slot fails its CRC.
        let next = log.generation + 1;
        drop(log);
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        let mut slot = [0u8; SLOT_BYTES];
        slot[..8].copy_from_slice(&MAGIC);
        slot[8..16].copy_from_slice(&next.to_le_bytes());
        file.write_all_at(&slot, SLOTS[(next % 2) as usize])
            .unwrap();
        assert_eq!(texts(&open(&path).1), ["after-checkpoint"]);
    }

    #[test]
    fn one_fsync_covers_every_frame_written_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j-wal");
        let (mut log, _) = open(&path);
        let fsyncs = log.file.fsyncs();
        log.write([b"unawaited".as_slice()].into_iter()).unwrap();
        log.write([b"awaited".as_slice()].into_iter()).unwrap();
        assert_eq!(
            log.file.fsyncs(),
            fsyncs,
            "writing frames does not fsync them"
        );
        log.sync().unwrap();
        assert_eq!(log.file.fsyncs(), fsyncs + 1, "one fsync for both frames");
        log.write([b"after".as_slice()].into_iter()).unwrap();
        log.sync().unwrap();
        assert_eq!(log.file.fsyncs(), fsyncs + 2);
        drop(log);
        assert_eq!(texts(&open(&path).1), ["unawaited", "awaited", "after"]);
    }

    #[test]
    fn a_batch_that_does_not_fit_is_refused_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j-wal");
        let (mut log, _) = open(&path);
        let big = "x".repeat(MIN_CAPACITY as usize);
        assert!(!log.fits(frame_len(big.len())));
        let err = log.append([big.as_bytes()].into_iter()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert!(log.is_empty());
        append(&mut log, &["small"]);
        drop(log);
        assert_eq!(texts(&open(&path).1), ["small"]);
    }

    #[test]
    fn garbage_in_the_file_reads_as_an_empty_log_and_never_panics() {
        let dir = tempfile::tempdir().unwrap();
        for garbage in [vec![], vec![0xff; 10], vec![0xab; 9000], {
            let mut v = vec![0u8; 5000];
            v[FRAMES_START as usize..FRAMES_START as usize + 4]
                .copy_from_slice(&u32::MAX.to_le_bytes());
            v
        }] {
            let path = dir.path().join("g-wal");
            std::fs::write(&path, &garbage).unwrap();
            let (mut log, payloads) = open(&path);
            assert!(payloads.is_empty());
            append(&mut log, &["fresh"]);
            drop(log);
            assert_eq!(texts(&open(&path).1), ["fresh"]);
            std::fs::remove_file(&path).unwrap();
        }
    }
}
