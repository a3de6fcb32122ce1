//! The journal's reads of single records and of its size: [`Journal::get`],
//! [`Journal::len`] and [`Journal::stats`] ([`JournalStats`]). Paged queries are in the
//! crate's `query`.

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde::Serialize;

use super::Journal;
use super::schema::{DATA_BYTES, META, RECORDS, key_ms, parse_key};
use crate::record::{ActivityRecord, format_timestamp};
use crate::{Error, Result};

/// Size and span of the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalStats {
    /// Number of records.
    pub records: u64,
    /// Size of the file on disk.
    pub file_bytes: u64,
    /// Logical size the `max_bytes` retention limit applies to.
    pub data_bytes: u64,
    /// Timestamp of the oldest record.
    pub oldest: Option<String>,
    /// Timestamp of the newest record.
    pub newest: Option<String>,
}

impl Journal {
    /// The record with this id. An id that is not a ULID is [`Error::InvalidId`]; a stored row
    /// that does not parse is [`Error::Corrupt`].
    pub fn get(&self, id: &str) -> Result<Option<ActivityRecord>> {
        let key = parse_key(id)?;
        self.guard(|| self.get_key(id, key))
    }

    fn get_key(&self, id: &str, key: [u8; 16]) -> Result<Option<ActivityRecord>> {
        let txn = self.db()?.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let Some(row) = table.get(key)? else {
            return Ok(None);
        };
        serde_json::from_slice(row.value())
            .map(Some)
            .map_err(|source| Error::Corrupt {
                id: id.to_string(),
                source,
            })
    }

    /// Number of records.
    pub fn len(&self) -> Result<u64> {
        self.guard(|| {
            let txn = self.db()?.begin_read()?;
            Ok(txn.open_table(RECORDS)?.len()?)
        })
    }

    /// Whether the journal holds no record.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Counts, sizes and the time span.
    pub fn stats(&self) -> Result<JournalStats> {
        self.guard(|| self.read_stats())
    }

    fn read_stats(&self) -> Result<JournalStats> {
        let txn = self.db()?.begin_read()?;
        let table = txn.open_table(RECORDS)?;
        let ts = |row: Option<(redb::AccessGuard<'_, [u8; 16]>, _)>| {
            row.map(|(k, _)| format_timestamp(key_ms(&k.value())))
        };
        let data_bytes = txn
            .open_table(META)?
            .get(DATA_BYTES)?
            .map_or(0, |g| g.value());
        let file_bytes = std::fs::metadata(&self.path)
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })?
            .len();
        Ok(JournalStats {
            records: table.len()?,
            file_bytes,
            data_bytes,
            oldest: ts(table.first()?),
            newest: ts(table.last()?),
        })
    }
}
