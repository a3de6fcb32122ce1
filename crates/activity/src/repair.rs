//! Repair: saving the readable records of a damaged journal into a new file.
//!
//! [`Journal::repair`] opens the damaged file on its own (it refuses, with
//! [`Error::Locked`], while a server holds it; if redb cannot open the file, it opens a copy
//! marked for redb's own recovery, see [`open_copy_for_recovery`]) and reads the records
//! table in key order.
//! When a read fails (redb reports corruption or panics on a damaged page), it skips ahead:
//! it probes start points further and further in time past the last record it read, then
//! narrows down to the first one that reads again, and goes on from there, counting one
//! unreadable range. Rows whose JSON does not parse are counted and left out. The records
//! it saved are written as they were stored, with their index entries, into a fresh file
//! beside the old one, and with them the hash chain's state and checkpoints: a repair never
//! links records into a new chain, so what the damage (or an edit) took shows in `verify` as
//! deleted or altered, and cannot be laundered by damaging the file and repairing it;
//! the registered sinks are carried over with their history and every saved record one of
//! them had not delivered is queued again (all saved records, when the outbox itself is
//! unreadable). Then the damaged file is moved aside as `<name>.damaged-<UTC time>` (never
//! deleted) and the new file takes its name.
//!
//! When redb cannot open the file even marked for recovery (damage in the pages it reads at
//! open), repair falls back to [`scan_for_records`]: it reads the file's raw bytes and keeps
//! every complete record JSON it finds there (a record is stored as its JSON, which starts
//! with its id). That finds no sink state, so no sink is carried over, and no chain state:
//! those records are linked into a new chain (their `verify` proves only what happened after
//! the repair).

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase};
use serde::Serialize;

use super::chain::ChainLink;
use super::chain::link;
use super::journal::{RECORDS, guard, key_ms, open_database};
use super::outbox;
use super::record::ActivityRecord;
use super::{Error, Journal, JournalOptions, Result, Retention};

/// What [`Journal::repair`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairReport {
    /// Records copied into the new journal.
    pub saved: u64,
    /// Stretches of the records table that could not be read.
    pub unreadable_ranges: u64,
    /// Rows that were read but did not parse as records.
    pub unreadable_records: u64,
    /// Sinks carried over.
    pub sinks: usize,
    /// Records queued again for the sinks.
    pub requeued: usize,
    /// Where the damaged file now is.
    pub damaged_copy: PathBuf,
}

/// Largest ULID timestamp.
const MAX_MS: u64 = (1 << 48) - 1;

/// The smallest storage key at `ms`.
fn key_at(ms: u64) -> [u8; 16] {
    ulid::Ulid::from_parts(ms.min(MAX_MS), 0).to_bytes()
}

/// The rows read so far, by key (a damaged page may repeat or reorder rows).
type Rows = BTreeMap<[u8; 16], Vec<u8>>;

/// Reads rows from `from` on into `rows` until the end (`Ok(true)`) or a failure
/// (`Ok(false)`); `last` is the last key read.
fn read_from(db: &Database, from: [u8; 16], rows: &mut Rows, last: &mut Option<[u8; 16]>) -> bool {
    let read = std::panic::catch_unwind(AssertUnwindSafe(|| -> Result<()> {
        let txn = db.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        for row in table.range(from..)? {
            let (key, value) = row?;
            let key = key.value();
            rows.insert(key, value.value().to_vec());
            *last = Some(key);
        }
        Ok(())
    }));
    matches!(read, Ok(Ok(())))
}

/// Whether a walk starting at `from` reads its first row (or finds none) without failing.
fn readable_from(db: &Database, from: [u8; 16]) -> bool {
    let probe = std::panic::catch_unwind(AssertUnwindSafe(|| -> Result<()> {
        let txn = db.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        if let Some(row) = table.range(from..)?.next() {
            row?;
        }
        Ok(())
    }));
    matches!(probe, Ok(Ok(())))
}

/// The first millisecond after `failed_ms` from which the table reads again, if any: doubling
/// steps forward, then bisection back to the boundary.
fn skip_past(db: &Database, failed_ms: u64) -> Option<u64> {
    let mut step = 1u64;
    let mut bad = failed_ms;
    let good = loop {
        let at = failed_ms.saturating_add(step).min(MAX_MS);
        if readable_from(db, key_at(at)) {
            break at;
        }
        if at == MAX_MS {
            return None;
        }
        bad = at;
        step = step.saturating_mul(2);
    };
    let (mut bad, mut good) = (bad, good);
    while good - bad > 1 {
        let mid = bad + (good - bad) / 2;
        if readable_from(db, key_at(mid)) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

/// Every row of the records table that can be read, and how many ranges could not.
fn salvage(db: &Database) -> (Rows, u64) {
    let mut rows = Rows::new();
    let mut ranges = 0;
    let mut from = [0u8; 16];
    loop {
        let mut last = None;
        if read_from(db, from, &mut rows, &mut last) {
            return (rows, ranges);
        }
        ranges += 1;
        let failed_ms = last.map_or_else(|| key_ms(&from), |k| key_ms(&k));
        match skip_past(db, failed_ms) {
            Some(ms) if key_at(ms) > from => from = key_at(ms),
            _ => return (rows, ranges),
        }
    }
}

/// Record JSON as the journal stores it starts with its id.
const RECORD_START: &[u8] = b"{\"id\":\"";
/// The scan reads the file this much at a time...
const SCAN_CHUNK: usize = 64 << 20;
/// ...with this much more, so a record that starts near the end of a chunk is read whole
/// (arguments are capped at 16 MiB, the rest of a record at well under 1 MiB).
const SCAN_OVERLAP: usize = 17 << 20;

/// Every complete record JSON in the raw bytes of `path`, one per id, and how many places
/// looked like the start of a record but did not parse. A page freed by an update may still
/// hold a record's older version: a finished record wins over a `pending` one.
fn scan_for_records(path: &Path) -> Result<(Vec<ActivityRecord>, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut found: BTreeMap<[u8; 16], ActivityRecord> = BTreeMap::new();
    let mut unparsable = 0u64;
    let mut offset = 0u64;
    let mut buf = Vec::new();
    while offset < len {
        buf.clear();
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        (&mut file)
            .take((SCAN_CHUNK + SCAN_OVERLAP) as u64)
            .read_to_end(&mut buf)
            .map_err(io)?;
        let last = offset + buf.len() as u64 >= len;
        // Starts in the overlap belong to the next chunk.
        let starts_end = if last {
            buf.len()
        } else {
            SCAN_CHUNK.min(buf.len())
        };
        let mut at = 0;
        while let Some(pos) = find(&buf[at..starts_end], RECORD_START) {
            let start = at + pos;
            at = start + 1;
            let mut values =
                serde_json::Deserializer::from_slice(&buf[start..]).into_iter::<ActivityRecord>();
            let record = match values.next() {
                Some(Ok(record)) => record,
                _ => {
                    unparsable += 1;
                    continue;
                }
            };
            let Ok(key) = super::journal::parse_key(&record.id) else {
                unparsable += 1;
                continue;
            };
            let newer = |old: &ActivityRecord| {
                old.status == super::record::Status::Pending
                    && record.status != super::record::Status::Pending
            };
            match found.get(&key) {
                Some(old) if !newer(old) => {}
                _ => {
                    found.insert(key, record);
                }
            }
        }
        if last {
            break;
        }
        offset += SCAN_CHUNK as u64;
    }
    Ok((found.into_values().collect(), unparsable))
}

/// The first position of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `activity.redb.damaged-20261123T101500Z` beside `path`.
fn damaged_name(path: &Path) -> PathBuf {
    let fmt = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let stamp = time::OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_else(|_| "unknown-time".to_owned());
    let name = path.file_name().map_or_else(
        || "activity.redb".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut aside = path.with_file_name(format!("{name}.damaged-{stamp}"));
    let mut n = 1;
    while aside.exists() {
        aside = path.with_file_name(format!("{name}.damaged-{stamp}-{n}"));
        n += 1;
    }
    aside
}

/// Offset of redb's flag byte in the file header (after its 9-byte magic number) and its
/// "recovery required" bit.
const REDB_FLAGS_OFFSET: u64 = 9;
const REDB_RECOVERY_REQUIRED: u8 = 2;

/// A copy of `path` marked "recovery required", for a file redb cannot open. A cleanly
/// closed redb file keeps its page allocator's state in pages of its own, read at open; when
/// those are damaged, opening fails. Opening a copy with the flag set makes redb rebuild that
/// state from the tables instead (the damaged file itself is never written).
fn open_copy_for_recovery(path: &Path) -> Result<PathBuf> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let copy = path.with_file_name(format!(
        "{}.repair-source",
        path.file_name().map_or_else(
            || "activity.redb".into(),
            |n| n.to_string_lossy().into_owned()
        )
    ));
    let io = |source| Error::Io {
        path: copy.clone(),
        source,
    };
    std::fs::copy(path, &copy).map_err(io)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&copy)
        .map_err(io)?;
    let mut flags = [0u8; 1];
    file.seek(SeekFrom::Start(REDB_FLAGS_OFFSET)).map_err(io)?;
    file.read_exact(&mut flags).map_err(io)?;
    file.seek(SeekFrom::Start(REDB_FLAGS_OFFSET)).map_err(io)?;
    file.write_all(&[flags[0] | REDB_RECOVERY_REQUIRED])
        .map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(copy)
}

/// What a repair saves: the rows as stored, with the chain's tables (the chain carried
/// over: what was lost shows in `verify` as deleted), or, from a file too damaged to open,
/// the records found in its bytes (linked into a new chain).
enum Saved {
    Stored {
        rows: Vec<Vec<u8>>,
        chain: link::ChainTables,
    },
    Typed(Vec<ActivityRecord>),
}

impl Journal {
    /// Saves the readable records of the journal at `path` into a new journal file and moves
    /// the old file aside (see the module docs). Offline only: a file another process holds
    /// is [`Error::Locked`]; a file redb cannot open at all is [`Error::Damaged`] and stays
    /// where it is. Blocking; call it outside any journal of the same file.
    pub fn repair(path: &Path) -> Result<RepairReport> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let (db, source_copy) = match open_database(path, 64 << 20) {
            Ok(db) => (db, None),
            Err(Error::Damaged { .. }) => {
                let copy = open_copy_for_recovery(path)?;
                match open_database(&copy, 64 << 20) {
                    Ok(db) => (db, Some(copy)),
                    Err(e) => {
                        let _ = std::fs::remove_file(&copy);
                        let Error::Damaged { detail, .. } = e else {
                            return Err(e);
                        };
                        let (records, unreadable) = scan_for_records(path)?;
                        if records.is_empty() {
                            return Err(Error::Unrecoverable {
                                path: path.to_path_buf(),
                                detail,
                            });
                        }
                        return Self::replace_with(
                            path,
                            Saved::Typed(records),
                            1,
                            unreadable,
                            Vec::new(),
                            Vec::new(),
                        );
                    }
                }
            }
            Err(e) => return Err(e),
        };
        let (rows, unreadable_ranges) = salvage(&db);
        let sinks = guard(path, || outbox::read_sinks(&db)).unwrap_or_else(|e| {
            tracing::warn!(
                "the sinks of the damaged journal cannot be read; they are not carried over: {e}"
            );
            Vec::new()
        });
        let undelivered = if sinks.is_empty() {
            Vec::new()
        } else {
            guard(path, || outbox::read_undelivered(&db)).unwrap_or_else(|e| {
                tracing::warn!("the outbox of the damaged journal cannot be read; every saved record is queued for the sinks again: {e}");
                rows.keys().copied().collect()
            })
        };
        let chain = guard(path, || link::read_tables(&db)).unwrap_or_else(|e| {
            tracing::warn!(
                "the hash chain's state of the damaged journal cannot be read; the saved \
                 records keep their chain fields, but its checkpoints are lost: {e}"
            );
            link::ChainTables::default()
        });
        drop(db);
        if let Some(copy) = source_copy {
            std::fs::remove_file(&copy).map_err(io(&copy))?;
        }
        let mut saved = Vec::with_capacity(rows.len());
        let mut unreadable_records = 0;
        for (key, json) in rows {
            match serde_json::from_slice::<ActivityRecord>(&json) {
                Ok(rec) if super::journal::parse_key(&rec.id).is_ok_and(|k| k == key) => {
                    saved.push(json);
                }
                _ => unreadable_records += 1,
            }
        }
        Self::replace_with(
            path,
            Saved::Stored { rows: saved, chain },
            unreadable_ranges,
            unreadable_records,
            sinks,
            undelivered,
        )
    }

    /// Writes `records` (and the sinks' state) into a fresh file, moves the damaged one aside
    /// and puts the fresh one in its place.
    fn replace_with(
        path: &Path,
        records: Saved,
        unreadable_ranges: u64,
        unreadable_records: u64,
        sinks: Vec<(String, outbox::SinkState)>,
        undelivered: Vec<[u8; 16]>,
    ) -> Result<RepairReport> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };

        let fresh = path.with_file_name(format!(
            "{}.repairing",
            path.file_name().map_or_else(
                || "activity.redb".into(),
                |n| n.to_string_lossy().into_owned()
            )
        ));
        if fresh.exists() {
            std::fs::remove_file(&fresh).map_err(io(&fresh))?;
        }
        let options = JournalOptions {
            retention: Retention {
                max_age: std::time::Duration::ZERO,
                min_age: std::time::Duration::ZERO,
                max_records: 0,
                max_bytes: 0,
                max_undelivered_bytes: 0,
                ..Retention::default()
            },
            // `bulk_load` commits in full; no write-ahead log is left beside the new file.
            log_capacity: 0,
            ..JournalOptions::default()
        };
        let saved = match &records {
            Saved::Typed(records) => records.len(),
            Saved::Stored { rows, .. } => rows.len(),
        } as u64;
        let requeued = {
            let journal = Journal::open(&fresh, options)?;
            match records {
                Saved::Typed(records) => journal.bulk_load(&records)?,
                Saved::Stored { rows, chain } => {
                    let head = rows
                        .iter()
                        .filter_map(|row| ChainLink::of_row(row))
                        .filter_map(|l| Some((l.seq?, crate::chain::unhex32(&l.hash?)?)))
                        .max_by_key(|(seq, _)| *seq);
                    journal.bulk_load_stored(rows)?;
                    journal.guard(|| {
                        let txn = journal.db()?.begin_write()?;
                        link::write_tables(&txn, &chain, head)?;
                        txn.commit()?;
                        Ok(())
                    })?;
                }
            }
            if sinks.is_empty() {
                0
            } else {
                journal.guard(|| outbox::restore(&*journal.db()?, &sinks, &undelivered))?
            }
        };
        let damaged_copy = damaged_name(path);
        std::fs::rename(path, &damaged_copy).map_err(io(path))?;
        std::fs::rename(&fresh, path).map_err(io(path))?;
        Ok(RepairReport {
            saved,
            unreadable_ranges,
            unreadable_records,
            sinks: sinks.len(),
            requeued,
            damaged_copy,
        })
    }
}
