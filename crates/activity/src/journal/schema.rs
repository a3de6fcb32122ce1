//! The journal's redb schema: the record, index and meta tables, the index keys of a record,
//! a row's logical cost, and the storage-key helpers (ULID ↔ key, key → time / id).

use redb::TableDefinition;

use crate::record::ActivityRecord;
use crate::{Error, Result};

/// The records: ULID bytes → record JSON.
pub(crate) const RECORDS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("activity");
/// An index table: `(key, ULID bytes)` → `()`.
pub(super) type IndexTable = TableDefinition<'static, (&'static str, [u8; 16]), ()>;
/// Number of index tables.
pub(super) const N_INDEXES: usize = 5;
/// Position of each index in [`INDEXES`] and [`IndexKeys`].
pub(crate) const IDX_INTENT: usize = 0;
pub(crate) const IDX_SERVER: usize = 1;
pub(crate) const IDX_TOOL: usize = 2;
pub(crate) const IDX_STATUS: usize = 3;
pub(crate) const IDX_TYPE: usize = 4;
/// The index tables, in `IDX_*` order.
pub(crate) const INDEXES: [IndexTable; N_INDEXES] = [
    TableDefinition::new("activity_by_intent"),
    TableDefinition::new("activity_by_server"),
    TableDefinition::new("activity_by_tool"),
    TableDefinition::new("activity_by_status"),
    TableDefinition::new("activity_by_type"),
];
/// An index table opened in a write transaction.
pub(crate) type OpenIndex<'txn> = redb::Table<'txn, (&'static str, [u8; 16]), ()>;

/// The index tables of [`INDEXES`] opened in `txn`, in `IDX_*` order.
pub(crate) fn open_indexes(txn: &redb::WriteTransaction) -> Result<Vec<OpenIndex<'_>>> {
    INDEXES
        .iter()
        .map(|def| Ok(txn.open_table(*def)?))
        .collect()
}

/// Small counters (the logical data size).
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("activity_meta");
/// Key in [`META`]: sum of [`row_cost`] over all rows.
pub(crate) const DATA_BYTES: &str = "data_bytes";

/// The index keys of one record, in `IDX_*` order (`None`: not indexed there).
pub(super) type IndexKeys = [Option<String>; N_INDEXES];

/// The index keys of `rec`: intent type, server, `server:tool`, status, type.
pub(crate) fn index_keys(rec: &ActivityRecord) -> IndexKeys {
    [
        rec.intent_type(),
        Some(rec.server_name.clone()),
        Some(format!("{}:{}", rec.server_name, rec.tool_name)),
        Some(rec.status.as_str().to_string()),
        Some(rec.record_type.as_str().to_string()),
    ]
}

/// Logical size of a row: key + JSON + its index entries. Retention's `max_bytes` applies to
/// the sum of these, not to the file (which redb grows and reuses, but never shrinks).
pub(crate) fn row_cost(json_len: usize, keys: &IndexKeys) -> u64 {
    let index: usize = keys.iter().flatten().map(|k| k.len() + 16).sum();
    (16 + json_len + index) as u64
}

/// Parses a 26-char ULID into its storage key.
pub(crate) fn parse_key(id: &str) -> Result<[u8; 16]> {
    ulid::Ulid::from_string(id)
        .map(|u| u.to_bytes())
        .map_err(|_| Error::InvalidId(id.to_string()))
}

/// The unix milliseconds of a storage key.
pub(crate) fn key_ms(key: &[u8; 16]) -> u64 {
    ulid::Ulid::from_bytes(*key).timestamp_ms()
}

/// The id string of a storage key.
pub(crate) fn key_id(key: &[u8; 16]) -> String {
    ulid::Ulid::from_bytes(*key).to_string()
}
