//! The hash chain against a real journal file that someone edited: a journal written by
//! the real [`Journal`] (calls going pending → final, checkpoints signed), closed, then
//! opened with redb directly to delete a record, change an argument, change a decision,
//! insert a forged record, reorder two, or cut the tail; `verify_chain` names each break
//! with the records around it. An untouched journal, one written before the chain (the
//! 0.1.0 fixture) and an export checked offline verify; a chain rewritten and signed again
//! with the journal's own key verifies alone but not against a witness's checkpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use mcpproxy_activity::{
    ActivityRecord, ChainOptions, ChainReport, Journal, JournalOptions, KEY_FILE, ProblemKind,
    RecordType, Source, Status, verify_export,
};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::{Value, json};

/// The journal's record table, as its file holds it (a tool that edits the file would open
/// the same).
const RECORDS: TableDefinition<[u8; 16], &[u8]> = TableDefinition::new("activity");
/// The journal's signed checkpoints: `seq` → checkpoint JSON.
const CHECKPOINTS: TableDefinition<u64, &[u8]> = TableDefinition::new("activity_checkpoints");

const CALLS: usize = 30;

fn options() -> JournalOptions {
    JournalOptions {
        chain: ChainOptions {
            checkpoint_every: 10,
            checkpoint_interval: Duration::from_secs(3600),
            ..ChainOptions::default()
        },
        ..JournalOptions::default()
    }
}

/// A journal of [`CALLS`] calls, each written pending then final, closed; its directory.
fn written() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.redb");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let journal = Journal::open(&path, options()).unwrap();
        for i in 0..CALLS {
            let mut record = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "delete");
            record.arguments = Some(json!({"path": format!("/srv/data/{i}")}));
            journal.append(record.clone()).await.unwrap();
            record.status = if i % 7 == 3 {
                Status::Blocked
            } else {
                Status::Success
            };
            if record.status == Status::Blocked {
                record.verdict.decision = mcpproxy_policy::Decision::Reject;
            }
            journal.upsert(record).await.unwrap();
            // Some calls' records are applied alone, some together.
            if i % 4 == 0 {
                journal.get("00000000000000000000000000").unwrap();
            }
        }
        drop(journal);
    });
    (dir, path)
}

/// The stored rows as JSON, in key order, with their keys.
fn rows(path: &Path) -> Vec<([u8; 16], Value)> {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(RECORDS).unwrap();
    table
        .iter()
        .unwrap()
        .map(|row| {
            let (key, value) = row.unwrap();
            (key.value(), serde_json::from_slice(value.value()).unwrap())
        })
        .collect()
}

/// The row whose `seq` is `seq`.
fn by_seq(path: &Path, seq: u64) -> ([u8; 16], Value) {
    rows(path)
        .into_iter()
        .find(|(_, v)| v["seq"] == seq)
        .unwrap_or_else(|| panic!("no record of seq {seq}"))
}

/// Edits the file as an attacker with write access would: `edit` gets the record table.
fn tamper(path: &Path, edit: impl FnOnce(&mut redb::Table<'_, [u8; 16], &[u8]>)) {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(RECORDS).unwrap();
        edit(&mut table);
    }
    txn.commit().unwrap();
}

/// A fresh id for a forged record (newer than every real one).
fn forged_key() -> ulid::Ulid {
    ulid::Ulid::from_string(&mcpproxy_activity::new_id().0).unwrap()
}

fn put(table: &mut redb::Table<'_, [u8; 16], &[u8]>, key: [u8; 16], value: &Value) {
    table
        .insert(key, serde_json::to_vec(value).unwrap().as_slice())
        .unwrap();
}

fn verify(path: &Path) -> ChainReport {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let journal: Arc<Journal> = Journal::open(path, options()).unwrap();
    journal.verify_chain(None, None).unwrap()
}

/// The problems of `report` as (kind, seq).
fn breaks(report: &ChainReport) -> Vec<(ProblemKind, Option<u64>)> {
    report.problems.iter().map(|p| (p.kind, p.seq)).collect()
}

#[test]
fn an_untouched_journal_verifies() {
    let (_dir, path) = written();
    let report = verify(&path);
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.chained, CALLS as u64);
    assert_eq!(report.unsigned_tail, 0, "closing signed the head");
    assert_eq!(report.last_checkpoint.map(|c| c.seq), Some(CALLS as u64));
}

#[test]
fn a_deleted_record_is_named_with_its_neighbours() {
    let (_dir, path) = written();
    let (key, _) = by_seq(&path, 12);
    let (_, before) = by_seq(&path, 11);
    tamper(&path, |t| {
        t.remove(key).unwrap();
    });
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Deleted, Some(12))],
        "{report:#?}"
    );
    let message = &report.problems[0].message;
    assert!(
        message.contains(before["id"].as_str().unwrap()),
        "{message}"
    );
    assert!(
        message.contains(before["timestamp"].as_str().unwrap()),
        "{message}"
    );
}

#[test]
fn a_changed_argument_is_named() {
    let (_dir, path) = written();
    let (key, mut record) = by_seq(&path, 5);
    record["arguments"]["path"] = "/srv/nothing-to-see".into();
    tamper(&path, |t| put(t, key, &record));
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Altered, Some(5))],
        "{report:#?}"
    );
    assert_eq!(report.problems[0].id.as_deref(), record["id"].as_str());
}

#[test]
fn a_changed_decision_is_named() {
    let (_dir, path) = written();
    let blocked = rows(&path)
        .into_iter()
        .find(|(_, v)| v["status"] == "blocked")
        .unwrap();
    let (key, mut record) = blocked;
    record["status"] = "success".into();
    record["verdict"]["decision"] = "allow".into();
    let seq = record["seq"].as_u64();
    tamper(&path, |t| put(t, key, &record));
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Altered, seq)],
        "{report:#?}"
    );
}

#[test]
fn a_forged_record_is_named_whether_it_claims_a_seq_or_none() {
    let (_dir, path) = written();
    let (_, model) = by_seq(&path, 20);
    let forged_id = forged_key();
    let mut forged = model.clone();
    forged["id"] = forged_id.to_string().into();
    forged["tool_name"] = "read".into();
    tamper(&path, |t| put(t, forged_id.to_bytes(), &forged));
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Inserted, Some(20))],
        "{report:#?}"
    );

    let (_dir, path) = written();
    let mut unchained = model;
    let object = unchained.as_object_mut().unwrap();
    for field in ["seq", "prev", "hash"] {
        object.remove(field);
    }
    let forged_id = forged_key();
    unchained["id"] = forged_id.to_string().into();
    tamper(&path, |t| put(t, forged_id.to_bytes(), &unchained));
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Inserted, None)],
        "{report:#?}"
    );
    assert!(report.problems[0].message.contains(&forged_id.to_string()));
}

#[test]
fn two_records_reordered_are_named() {
    let (_dir, path) = written();
    let (key_a, mut a) = by_seq(&path, 8);
    let (key_b, mut b) = by_seq(&path, 9);
    for field in ["seq", "prev", "hash"] {
        let (x, y) = (a[field].clone(), b[field].clone());
        a[field] = y;
        b[field] = x;
    }
    tamper(&path, |t| {
        put(t, key_a, &a);
        put(t, key_b, &b);
    });
    let report = verify(&path);
    let found = breaks(&report);
    assert!(
        found.contains(&(ProblemKind::Altered, Some(8))),
        "{report:#?}"
    );
    assert!(
        found.contains(&(ProblemKind::Altered, Some(9))),
        "{report:#?}"
    );
}

#[test]
fn a_cut_tail_is_named() {
    let (_dir, path) = written();
    let last = CALLS as u64;
    let keys: Vec<[u8; 16]> = (last - 2..=last).map(|s| by_seq(&path, s).0).collect();
    tamper(&path, |t| {
        for key in keys {
            t.remove(key).unwrap();
        }
    });
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Truncated, Some(last - 2))],
        "{report:#?}"
    );
}

#[test]
fn a_journal_written_before_the_chain_verifies_its_old_part_unchained() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.redb");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/journal-0.1.0.redb");
    std::fs::copy(fixture, &path).unwrap();
    let old = rows(&path).len() as u64;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let journal = Journal::open(&path, options()).unwrap();
        let report = journal.verify_chain(None, None).unwrap();
        assert!(report.ok, "{report:#?}");
        assert_eq!((report.unchained, report.chained), (old, 0));
        for _ in 0..5 {
            let mut record = ActivityRecord::new(RecordType::ToolCall, Source::Cli, "s", "t");
            record.status = Status::Success;
            journal.append(record).await.unwrap();
        }
        let report = journal.verify_chain(None, None).unwrap();
        assert!(report.ok, "{report:#?}");
        assert_eq!((report.unchained, report.chained), (old, 5));
    });
}

#[test]
fn an_export_with_proof_verifies_offline_and_an_edited_one_does_not() {
    let (_dir, path) = written();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let journal = Journal::open(&path, options()).unwrap();
    let mut export = Vec::new();
    journal
        .for_each_export_chunk(&Default::default(), None, |chunk| {
            for (record, row) in chunk {
                mcpproxy_activity::ExportFormat::Jsonl.write_row(
                    record,
                    row.as_deref(),
                    &mut export,
                );
            }
            true
        })
        .unwrap();
    export.extend(journal.chain_trailer().unwrap());
    let key = journal.public_key();
    let report = verify_export(export.as_slice(), Some(&key), None).unwrap();
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.key_source.as_deref(), Some("given"));

    let text = String::from_utf8(export).unwrap();
    let edited = text.replacen("/srv/data/3\"", "/srv/data/4\"", 1);
    let report = verify_export(edited.as_bytes(), Some(&key), None).unwrap();
    assert_eq!(report.problems.len(), 1, "{report:#?}");
    assert_eq!(report.problems[0].kind, ProblemKind::Altered);
}

/// What the chain cannot catch alone, and the witness can: someone holding the machine (the
/// key too) changes a record, recomputes every hash after it and signs the result again.
#[test]
fn a_chain_rewritten_and_signed_again_verifies_alone_but_not_against_a_witness() {
    let (dir, path) = written();
    let witness = {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _guard = runtime.enter();
        let journal = Journal::open(&path, options()).unwrap();
        let kept = journal.latest_checkpoint().unwrap().expect("a checkpoint");
        // What a witness stores: the data of GET /api/v1/activity/checkpoint.
        let line = json!({"checkpoint": kept, "key": journal.public_key()}).to_string();
        mcpproxy_activity::read_witness(line.as_bytes()).unwrap()
    };

    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let unhex = |text: &str| -> [u8; 32] {
        std::array::from_fn(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
    };
    let mut chain: Vec<([u8; 16], Value)> = (1..=CALLS as u64).map(|s| by_seq(&path, s)).collect();
    chain[4].1["arguments"]["path"] = "/srv/elsewhere".into();
    let mut prev = unhex(chain[4].1["prev"].as_str().unwrap());
    for (_, record) in &mut chain[4..] {
        record["prev"] = hex(&prev).into();
        let hash = mcpproxy_activity::record_hash(&prev, record);
        record["hash"] = hex(&hash).into();
        prev = hash;
    }
    let key = mcpproxy_activity::SigningKey::load_or_create(&dir.path().join(KEY_FILE)).unwrap();
    let resigned = key.checkpoint(CALLS as u64, &prev, 1);
    let db = redb::Database::open(&path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut records = txn.open_table(RECORDS).unwrap();
        for (key, record) in &chain[4..] {
            put(&mut records, *key, record);
        }
        let mut checkpoints = txn.open_table(CHECKPOINTS).unwrap();
        checkpoints.retain(|_, _| false).unwrap();
        let json = serde_json::to_vec(&resigned).unwrap();
        checkpoints.insert(CALLS as u64, json.as_slice()).unwrap();
    }
    txn.commit().unwrap();
    drop(db);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let journal = Journal::open(&path, options()).unwrap();
    let alone = journal.verify_chain(None, None).unwrap();
    assert!(
        alone.ok,
        "the key holder's rewrite holds on its own: {alone:#?}"
    );
    let checked = journal.verify_chain_with(None, None, witness).unwrap();
    assert_eq!(
        breaks(&checked),
        [(ProblemKind::CheckpointMismatch, Some(CALLS as u64))],
        "{checked:#?}"
    );
}

/// `activity repair` carries the chain over: a repaired journal verifies as the original
/// did, and an edit made before the repair is still named after it (a repair cannot be used
/// to launder one).
#[test]
fn a_repair_keeps_the_chain_and_does_not_launder_an_edit() {
    let (_dir, path) = written();
    Journal::repair(&path).unwrap();
    let report = verify(&path);
    assert!(report.ok, "{report:#?}");
    assert_eq!(report.chained, CALLS as u64);
    assert_eq!(report.last_checkpoint.map(|c| c.seq), Some(CALLS as u64));

    let (_dir, path) = written();
    let (key, _) = by_seq(&path, 7);
    tamper(&path, |t| {
        t.remove(key).unwrap();
    });
    Journal::repair(&path).unwrap();
    let report = verify(&path);
    assert_eq!(
        breaks(&report),
        [(ProblemKind::Deleted, Some(7))],
        "{report:#?}"
    );
}
