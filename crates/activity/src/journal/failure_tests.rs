//! Unit tests of the journal when the disk refuses its writes (through [`WriteFaults`], which
//! fails the real file operations with `ENOSPC`): records somebody waits for are refused,
//! the health says why, nothing acknowledged is lost, and the journal writes again by itself
//! once the disk does, in each durability mode.

use super::writer::Put;
use super::writer::commit_puts;
use super::*;
use crate::record::ActivityRecord;
use crate::record::{Status, now_ms};
use crate::test_util::{check_indexes, open_temp, rec_at};
use crate::{Error, Result};
use std::sync::Arc;
use std::time::Duration;

const FULL: &str = "No space left on device";

/// A journal with `options` whose writes fail while the returned switch is on.
fn faulty(options: JournalOptions) -> (tempfile::TempDir, Arc<Journal>, WriteFaults) {
    let faults = WriteFaults::switch();
    let (dir, j) = open_temp(JournalOptions {
        write_faults: Some(faults.clone()),
        ..options
    });
    (dir, j, faults)
}

/// Waits (up to 30 s) until the journal's health is `ok` (`true`) or `failing`.
async fn until_failing(j: &Journal, failing: bool) {
    for _ in 0..3_000 {
        if j.is_failing() == failing {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the journal's health stayed {:?}", j.health());
}

fn assert_refused(result: Result<()>) {
    match result {
        Err(Error::Unwritable { reason }) => assert_eq!(reason, FULL),
        other => panic!("expected the refusal of a journal that cannot write, got {other:?}"),
    }
}

/// The scenario every mode shares: a call recorded before the disk fails keeps its record
/// and its outcome (submitted while failing), calls made while it fails are refused and
/// leave no record, and once the disk takes writes again the journal does too, without
/// being re-opened by anyone.
async fn refuses_then_recovers(options: JournalOptions) {
    let (_dir, j, faults) = faulty(options);
    let before = rec_at(now_ms(), "fs", "read_file", "read", Status::Pending);
    j.append(before.clone()).await.unwrap();
    assert_eq!(j.health().state, "ok");

    faults.set(true);
    let mut done = before.clone();
    done.status = Status::Success;
    j.submit(done.clone());
    // The first record somebody waits for after the failure is refused (sync mode), or
    // the failure is found by the writer a moment later (async mode).
    let refused = rec_at(now_ms(), "fs", "write_file", "destructive", Status::Pending);
    if j.append(refused.clone()).await.is_ok() {
        assert!(matches!(j.options().durability, Durability::Async { .. }));
        until_failing(&j, true).await;
    }
    let health = j.health();
    assert_eq!(health.state, "failing");
    assert_eq!(health.reason.as_deref(), Some(FULL));
    assert!(health.since.is_some());
    // Every later one is refused at once.
    let later = rec_at(now_ms(), "fs", "write_file", "destructive", Status::Pending);
    assert_refused(j.append(later.clone()).await);
    assert!(j.flush().await.is_err(), "a flush while failing succeeds");

    faults.set(false);
    until_failing(&j, false).await;
    assert_eq!(j.health().reason, None);
    let after = rec_at(now_ms(), "fs", "read_file", "read", Status::Pending);
    j.append(after.clone()).await.unwrap();
    j.flush().await.unwrap();

    assert_eq!(
        j.get(&done.id).unwrap().as_ref(),
        Some(&done),
        "outcome lost"
    );
    assert_eq!(j.get(&after.id).unwrap().as_ref(), Some(&after));
    assert_eq!(
        j.get(&later.id).unwrap(),
        None,
        "a refused record was written"
    );
    if matches!(j.options().durability, Durability::Sync) {
        assert_eq!(
            j.get(&refused.id).unwrap(),
            None,
            "a refused record was written"
        );
    } else {
        // Async mode acknowledged it before the writer found out: it is kept, not lost.
        assert_eq!(j.get(&refused.id).unwrap().as_ref(), Some(&refused));
    }
    check_indexes(&j);

    // What the running journal shows is what the file holds.
    let path = j.path().to_path_buf();
    let shown = j.len().unwrap();
    drop(j);
    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    assert_eq!(j.len().unwrap(), shown);
    assert_eq!(j.get(&done.id).unwrap().as_ref(), Some(&done));
    assert_eq!(j.get(&later.id).unwrap(), None);
    check_indexes(&j);
}

#[tokio::test]
async fn sync_mode_with_the_log_refuses_while_the_disk_fails_and_recovers_by_itself() {
    refuses_then_recovers(JournalOptions {
        checkpoint_idle: Duration::from_secs(600),
        ..JournalOptions::default()
    })
    .await;
}

#[tokio::test]
async fn sync_mode_without_a_log_refuses_while_the_disk_fails_and_recovers_by_itself() {
    refuses_then_recovers(JournalOptions {
        log_capacity: 0,
        ..JournalOptions::default()
    })
    .await;
}

#[tokio::test]
async fn async_mode_reports_the_failure_once_it_knows_and_keeps_what_it_acknowledged() {
    refuses_then_recovers(JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_millis(20),
        },
        ..JournalOptions::default()
    })
    .await;
}

#[tokio::test]
async fn records_acknowledged_through_the_log_survive_a_failure_and_the_log_is_used_again() {
    let (_dir, j, faults) = faulty(JournalOptions {
        checkpoint_idle: Duration::from_secs(600),
        ..JournalOptions::default()
    });
    let log = wal::path_for(j.path());
    // Acknowledged once in the log; applied to redb without an fsync, which a re-open
    // forgets: the recovery writes them back from the log.
    let mut acked = Vec::new();
    for i in 0..50 {
        let rec = rec_at(now_ms(), "s", &format!("t{i}"), "read", Status::Success);
        j.append(rec.clone()).await.unwrap();
        acked.push(rec);
    }
    faults.set(true);
    assert_refused(
        j.append(rec_at(now_ms(), "s", "x", "read", Status::Pending))
            .await,
    );
    faults.set(false);
    until_failing(&j, false).await;
    for rec in &acked {
        assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(rec));
    }
    assert_eq!(j.len().unwrap(), 50);
    // The log is back: a record is acknowledged through it again.
    let next = rec_at(now_ms(), "s", "next", "read", Status::Success);
    j.append(next.clone()).await.unwrap();
    let logged: Vec<String> = wal::read(&log)
        .unwrap()
        .iter()
        .map(|json| serde_json::from_slice::<ActivityRecord>(json).unwrap().id)
        .collect();
    assert_eq!(logged, [next.id]);
    check_indexes(&j);
}

#[tokio::test]
async fn the_recovery_removes_a_refused_record_the_file_holds_and_keeps_acknowledged_ones() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let acked = rec_at(now_ms(), "s", "a", "read", Status::Success);
    let refused = rec_at(now_ms(), "s", "b", "write", Status::Pending);
    let db = j.db().unwrap();
    let puts = [
        Put::new(&acked, false).unwrap(),
        Put::new(&refused, false).unwrap(),
    ];
    // Both reached the file before the disk failed; only `acked` was acknowledged.
    commit_puts(
        &db,
        &[&puts[0], &puts[1]],
        redb::Durability::Immediate,
        true,
        &j.chain,
    )
    .unwrap();
    writer::write_missing(&db, &[&puts[0]], &[&puts[1]], true, &j.chain).unwrap();
    drop(db);
    assert_eq!(j.get(&acked.id).unwrap().as_ref(), Some(&acked));
    assert_eq!(j.get(&refused.id).unwrap(), None);
    assert_eq!(j.len().unwrap(), 1);
    check_indexes(&j);
}
