//! Helpers shared by the activity tests.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadableDatabase, ReadableTable};

use super::journal::{INDEXES, RECORDS, index_keys, key_id};
use super::record::{ActivityRecord, RecordType, Source, Status, format_timestamp};
use super::{Journal, JournalOptions};
use mcpproxy_policy::{Intent, OperationType};

static SEQ: AtomicU64 = AtomicU64::new(1);

/// A record whose id carries `ms` (unique random part).
pub(crate) fn rec_at(
    ms: u64,
    server: &str,
    tool: &str,
    variant: &str,
    status: Status,
) -> ActivityRecord {
    let id = ulid::Ulid::from_parts(ms, u128::from(SEQ.fetch_add(1, Ordering::Relaxed)));
    ActivityRecord {
        id: id.to_string(),
        record_type: RecordType::ToolCall,
        source: Source::Mcp,
        server_name: server.into(),
        tool_name: tool.into(),
        tool_variant: Some(operation(variant)),
        status,
        timestamp: format_timestamp(ms),
        arguments: Some(serde_json::json!({"path": "/tmp/x", "n": ms % 97})),
        ..ActivityRecord::default()
    }
}

/// A successful read of `server:tool` at the current time whose arguments carry `pad` bytes
/// of padding (for tests that need records of a given size).
pub(crate) fn padded_read(server: &str, tool: &str, pad: usize) -> ActivityRecord {
    let mut rec = rec_at(
        crate::record::now_ms(),
        server,
        tool,
        "read",
        Status::Success,
    );
    rec.arguments = Some(serde_json::json!({"pad": "x".repeat(pad)}));
    rec
}

/// A record with a declared intent overriding its variant.
pub(crate) fn with_intent(mut rec: ActivityRecord, op: &str) -> ActivityRecord {
    rec.intent = Some(Intent {
        operation_type: Some(operation(op)),
        ..Default::default()
    });
    rec
}

/// `read`, `write` or `destructive` as an operation type (tests name them as words).
pub(crate) fn operation(word: &str) -> OperationType {
    word.to_ascii_lowercase()
        .parse()
        .unwrap_or_else(|e| panic!("test records use read/write/destructive: {e}"))
}

/// A journal in a fresh temp dir.
pub(crate) fn open_temp(options: JournalOptions) -> (tempfile::TempDir, Arc<Journal>) {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(&dir.path().join("sub/activity.redb"), options).unwrap();
    (dir, journal)
}

/// Asserts the index tables hold exactly the entries the stored records imply.
pub(crate) fn check_indexes(journal: &Journal) {
    journal.catch_up();
    let txn = journal.db().unwrap().begin_read().unwrap();
    let records = txn.open_table(RECORDS).unwrap();
    let mut want: Vec<BTreeSet<(String, String)>> = vec![BTreeSet::new(); INDEXES.len()];
    for row in records.iter().unwrap() {
        let (k, v) = row.unwrap();
        let rec: ActivityRecord = serde_json::from_slice(v.value()).unwrap();
        for (i, key) in index_keys(&rec).into_iter().enumerate() {
            if let Some(key) = key {
                want[i].insert((key, key_id(&k.value())));
            }
        }
    }
    for (i, def) in INDEXES.iter().enumerate() {
        let table = txn.open_table(*def).unwrap();
        let have: BTreeSet<(String, String)> = table
            .iter()
            .unwrap()
            .map(|row| {
                let (k, _) = row.unwrap();
                let (key, id) = k.value();
                (key.to_string(), key_id(&id))
            })
            .collect();
        assert_eq!(have, want[i], "index {i} out of sync");
    }
}

/// The row `journal` stores for `id`, as stored (chain fields included).
pub(crate) fn stored_row(journal: &Journal, id: &str) -> Vec<u8> {
    let key = crate::journal::parse_key(id).unwrap();
    journal.catch_up();
    let txn = journal.db().unwrap().begin_read().unwrap();
    let table = txn.open_table(RECORDS).unwrap();
    table.get(key).unwrap().unwrap().value().to_vec()
}
