//! Unit tests of the journal's use of its write-ahead log: what sync mode writes there, what
//! a checkpoint does, what a replay writes back (and what it leaves alone), and a log too
//! small for a batch. The `kill -9` tests are in `crash_tests`.

use super::wal::{self, WriteAheadLog};
use super::writer::Put;
use super::*;
use crate::record::ActivityRecord;
use crate::record::{Status, now_ms};
use crate::test_util::{check_indexes, open_temp, padded_read, rec_at};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::tests::stored_within;

/// The ids of the records in the current generation of the log beside `journal`.
fn logged_ids(journal: &Path) -> Vec<String> {
    wal::read(&wal::path_for(journal))
        .unwrap()
        .iter()
        .map(|json| serde_json::from_slice::<ActivityRecord>(json).unwrap().id)
        .collect()
}

/// The stored JSON of `rec`, as the writer writes it.
fn stored(rec: &ActivityRecord) -> Vec<u8> {
    Put::new(rec, false).unwrap().json
}

/// Appends `records`' stored JSON to the log of the (closed) journal at `journal`.
fn write_log(journal: &Path, records: &[&ActivityRecord]) {
    let (mut log, _) = WriteAheadLog::open(&wal::path_for(journal), DEFAULT_LOG_CAPACITY).unwrap();
    let payloads: Vec<Vec<u8>> = records.iter().map(|r| stored(r)).collect();
    log.append(payloads.iter().map(Vec::as_slice)).unwrap();
}

fn backlog(j: &Journal) -> u64 {
    j.sink_status().unwrap()[0].backlog
}

#[tokio::test]
async fn sync_mode_logs_each_acknowledged_record_and_a_checkpoint_folds_the_log_in() {
    let (_dir, j) = open_temp(JournalOptions {
        checkpoint_idle: Duration::from_secs(600),
        ..JournalOptions::default()
    });
    let first = rec_at(now_ms(), "s", "t1", "read", Status::Pending);
    let second = rec_at(now_ms(), "s", "t2", "write", Status::Success);
    j.append(first.clone()).await.unwrap();
    j.append(second.clone()).await.unwrap();
    assert_eq!(logged_ids(j.path()), [first.id.clone(), second.id.clone()]);
    assert_eq!(j.get(&first.id).unwrap().as_ref(), Some(&first));

    j.checkpoint().unwrap();
    assert!(logged_ids(j.path()).is_empty());
    assert_eq!(j.get(&second.id).unwrap().as_ref(), Some(&second));
    assert_eq!(j.restored_from_log(), 0);
}

/// A sync-mode journal with a log, whose unsynced frames wait up to `carry` for an fsync,
/// and the fsyncs its writer has made so far.
fn counting_fsyncs(carry: Duration) -> (tempfile::TempDir, Arc<Journal>, Arc<AtomicUsize>) {
    let fsyncs = Arc::new(AtomicUsize::new(0));
    let counter = fsyncs.clone();
    let (dir, j) = open_temp(JournalOptions {
        sync_carry: carry,
        checkpoint_idle: Duration::from_secs(600),
        on_fsync: Some(FsyncObserver(Arc::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        }))),
        ..JournalOptions::default()
    });
    (dir, j, fsyncs)
}

#[tokio::test]
async fn an_unawaited_record_is_committed_at_once_and_shares_the_next_awaited_ones_fsync() {
    // A window far longer than the test: only an awaited record or a flush ends it.
    let (_dir, j, fsyncs) = counting_fsyncs(Duration::from_secs(600));
    let finished = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.submit(finished.clone());
    assert!(
        stored_within(&j, &finished.id, 2_000).await,
        "not committed at once"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(fsyncs.load(Ordering::SeqCst), 0, "fsync'd alone");
    // The next call's pending record is awaited: one fsync covers both.
    let pending = rec_at(now_ms(), "s", "t", "read", Status::Pending);
    j.append(pending.clone()).await.unwrap();
    assert_eq!(fsyncs.load(Ordering::SeqCst), 1);
    assert_eq!(
        logged_ids(j.path()),
        [finished.id.clone(), pending.id.clone()]
    );
    // A flush ends the window too (the test would wait 600 s otherwise).
    let another = rec_at(now_ms(), "s", "t", "read", Status::Error);
    j.submit(another.clone());
    tokio::time::timeout(Duration::from_secs(60), j.flush())
        .await
        .expect("the flush ended the window")
        .unwrap();
    assert_eq!(fsyncs.load(Ordering::SeqCst), 2);
    assert_eq!(logged_ids(j.path()).len(), 3);
    check_indexes(&j);
}

#[tokio::test]
async fn an_unawaited_record_alone_is_fsynced_after_the_window() {
    let (_dir, j, fsyncs) = counting_fsyncs(Duration::from_millis(10));
    let finished = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.submit(finished.clone());
    let mut synced = false;
    for _ in 0..2_000 {
        if fsyncs.load(Ordering::SeqCst) == 1 {
            synced = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(synced, "the record was never fsync'd");
    assert_eq!(logged_ids(j.path()), [finished.id]);
}

#[tokio::test]
async fn a_read_sees_every_record_sent_before_it_though_records_are_applied_later() {
    // Records are acknowledged once logged and applied to redb in batches: a read asks the
    // writer to catch up first, so it sees a record submitted (not even awaited) before it.
    let (_dir, j, _) = counting_fsyncs(Duration::from_secs(600));
    for i in 0..50 {
        let pending = rec_at(now_ms(), "s", &format!("t{i}"), "read", Status::Pending);
        j.append(pending.clone()).await.unwrap();
        assert_eq!(j.get(&pending.id).unwrap().as_ref(), Some(&pending));
        let mut finished = pending.clone();
        finished.status = Status::Success;
        j.submit(finished.clone());
        assert_eq!(j.get(&finished.id).unwrap().as_ref(), Some(&finished));
    }
    assert_eq!(j.len().unwrap(), 50);
    check_indexes(&j);
}

#[tokio::test]
async fn an_idle_writer_checkpoints_and_closing_leaves_an_empty_log() {
    let (dir, j) = open_temp(JournalOptions {
        checkpoint_idle: Duration::from_millis(20),
        ..JournalOptions::default()
    });
    let rec = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.append(rec.clone()).await.unwrap();
    let mut folded = false;
    for _ in 0..200 {
        if logged_ids(j.path()).is_empty() {
            folded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(folded, "the idle checkpoint never ran");

    let path = j.path().to_path_buf();
    let other = rec_at(now_ms(), "s", "t", "read", Status::Success);
    drop(j);
    let (_keep, j) = (
        dir,
        Journal::open(&path, JournalOptions::default()).unwrap(),
    );
    j.append(other).await.unwrap();
    let path = j.path().to_path_buf();
    drop(j);
    assert!(logged_ids(&path).is_empty(), "closing checkpoints");
}

#[tokio::test]
async fn replay_writes_back_only_what_the_file_lacks_and_queues_it_for_sinks_once() {
    let (_dir, j) = open_temp(JournalOptions::default());
    j.register_sinks(&["store".to_owned()]).unwrap();
    let kept = rec_at(now_ms(), "s", "kept", "read", Status::Success);
    j.append(kept.clone()).await.unwrap();
    assert_eq!(backlog(&j), 1);
    let path = j.path().to_path_buf();
    drop(j);

    // What a crash leaves: the log holds `kept` (already in the file), a call's pending and
    // finished records and one more, none of which the file holds.
    let pending = rec_at(now_ms(), "s", "call", "write", Status::Pending);
    let mut finished = pending.clone();
    finished.status = Status::Success;
    finished.duration_ms = 7;
    let lone = rec_at(now_ms(), "s", "lone", "destructive", Status::Blocked);
    write_log(&path, &[&kept, &pending, &finished, &lone]);

    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    assert_eq!(j.restored_from_log(), 2);
    assert_eq!(j.get(&kept.id).unwrap().as_ref(), Some(&kept));
    assert_eq!(j.get(&pending.id).unwrap().as_ref(), Some(&finished));
    assert_eq!(j.get(&lone.id).unwrap().as_ref(), Some(&lone));
    assert_eq!(j.len().unwrap(), 3);
    // `kept` is not queued again; the two restored finished records are, once each.
    assert_eq!(backlog(&j), 3);
    check_indexes(&j);
    assert!(
        logged_ids(&path).is_empty(),
        "the log starts over after a replay"
    );
    drop(j);

    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    assert_eq!(j.restored_from_log(), 0);
    assert_eq!(backlog(&j), 3);
}

#[tokio::test]
async fn an_async_mode_start_replays_a_sync_runs_log_then_removes_it() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let path = j.path().to_path_buf();
    drop(j);
    let rec = rec_at(now_ms(), "s", "t", "read", Status::Success);
    write_log(&path, &[&rec]);

    let j = Journal::open(
        &path,
        JournalOptions {
            durability: Durability::Async {
                flush: Duration::from_secs(1),
            },
            ..JournalOptions::default()
        },
    )
    .unwrap();
    assert_eq!(j.restored_from_log(), 1);
    assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(&rec));
    assert!(!wal::path_for(&path).exists());
}

#[tokio::test]
async fn without_a_log_sync_mode_commits_each_batch_in_full() {
    let (_dir, j) = open_temp(JournalOptions {
        log_capacity: 0,
        ..JournalOptions::default()
    });
    let rec = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.append(rec.clone()).await.unwrap();
    assert!(!wal::path_for(j.path()).exists());
    assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(&rec));
}

#[tokio::test]
async fn a_log_smaller_than_the_batches_checkpoints_and_keeps_every_record() {
    // The smallest log (64 KiB) takes about 60 of these records: 400 concurrent appends
    // and one record larger than the whole log go through many checkpoints.
    let (_dir, j) = open_temp(JournalOptions {
        log_capacity: 1,
        ..JournalOptions::default()
    });
    let mut tasks = Vec::new();
    for t in 0..8 {
        let j = j.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..50 {
                let rec = padded_read(&format!("s{t}"), &format!("t{i}"), 1000);
                ids.push(rec.id.clone());
                j.append(rec).await.unwrap();
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.extend(task.await.unwrap());
    }
    let mut huge = rec_at(now_ms(), "s", "huge", "write", Status::Success);
    huge.arguments = Some(serde_json::json!({"pad": "y".repeat(100_000)}));
    let huge_stored = stored(&huge);
    assert!(
        huge_stored.len() as u64 > 64 << 10,
        "the record must outgrow the log"
    );
    j.append(huge.clone()).await.unwrap();
    ids.push(huge.id.clone());

    let path = j.path().to_path_buf();
    drop(j);
    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    let missing = ids.iter().filter(|id| j.get(id).unwrap().is_none()).count();
    assert_eq!(missing, 0);
    assert_eq!(j.len().unwrap(), 401);
    check_indexes(&j);
}

#[tokio::test]
async fn a_log_whose_fsync_fails_is_given_up_and_records_are_committed_in_full() {
    let failing = Arc::new(AtomicBool::new(false));
    let (_dir, j) = open_temp(JournalOptions {
        failing_log: Some(failing.clone()),
        checkpoint_idle: Duration::from_secs(600),
        ..JournalOptions::default()
    });
    let log = wal::path_for(j.path());
    let first = rec_at(now_ms(), "s", "first", "read", Status::Success);
    j.append(first.clone()).await.unwrap();
    assert_eq!(logged_ids(j.path()), std::slice::from_ref(&first.id));

    // The disk starts failing the log's fsyncs: the writer gives the log up, makes the
    // record durable with a full commit instead and still acknowledges it.
    failing.store(true, Ordering::SeqCst);
    let second = rec_at(now_ms(), "s", "second", "write", Status::Pending);
    j.append(second.clone()).await.unwrap();
    assert!(!log.exists(), "a log that cannot be written is removed");
    // From then on every batch is a full commit.
    let third = rec_at(now_ms(), "s", "third", "read", Status::Success);
    j.append(third.clone()).await.unwrap();
    assert!(!log.exists());

    let path = j.path().to_path_buf();
    drop(j);
    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    assert_eq!(j.restored_from_log(), 0);
    for rec in [&first, &second, &third] {
        assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(rec));
    }
    check_indexes(&j);
    assert!(log.exists(), "the next start in sync mode makes a new log");
}
