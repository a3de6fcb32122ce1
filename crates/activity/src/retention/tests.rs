//! Unit tests of `retention`.

use super::*;
use crate::record::{RecordType, Status};
use crate::test_util::{check_indexes, open_temp, rec_at};
use crate::{Filter, JournalOptions, Retention};

const DAY: u64 = 24 * 3600 * 1000;

fn options(retention: Retention, batch: usize) -> JournalOptions {
    JournalOptions {
        retention,
        retention_batch: batch,
        ..JournalOptions::default()
    }
}

fn none() -> Retention {
    Retention {
        max_age: Duration::ZERO,
        min_age: Duration::ZERO,
        max_records: 0,
        max_bytes: 0,
        max_undelivered_bytes: 0,
        interval: Duration::from_secs(60),
    }
}

/// 100 records, one a minute, ending now.
fn fill(j: &Journal) -> Vec<ActivityRecord> {
    let now = now_ms();
    let recs: Vec<_> = (0..100u64)
        .map(|i| {
            let server = if i % 2 == 0 { "even" } else { "odd" };
            rec_at(
                now - (99 - i) * 60_000,
                server,
                "t",
                "write",
                Status::Success,
            )
        })
        .collect();
    j.bulk_load(&recs).unwrap();
    recs
}

fn ids(j: &Journal) -> Vec<String> {
    let mut ids: Vec<_> = j
        .query(&Filter::default(), 1000, 0)
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.reverse();
    ids
}

#[test]
fn by_count_oldest_first_in_batches() {
    let (_dir, j) = open_temp(options(
        Retention {
            max_records: 30,
            ..none()
        },
        7,
    ));
    let recs = fill(&j);
    assert_eq!(j.run_retention().unwrap(), 70);
    let want: Vec<_> = recs[70..].iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids(&j), want);
    assert_eq!(j.run_retention().unwrap(), 0);
    let even = Filter {
        server: Some("even".into()),
        ..Filter::default()
    };
    assert_eq!(j.query(&even, 1000, 0).unwrap().records.len(), 15);
    check_indexes(&j);
}

#[test]
fn by_age() {
    let (_dir, j) = open_temp(options(
        Retention {
            max_age: Duration::from_secs(3600),
            ..none()
        },
        10_000,
    ));
    let now = now_ms();
    let old: Vec<_> = (0..50)
        .map(|i| rec_at(now - 10 * DAY + i, "s", "t", "read", Status::Success))
        .collect();
    let new: Vec<_> = (0..20)
        .map(|i| rec_at(now - 1000 + i, "s", "t", "read", Status::Success))
        .collect();
    j.bulk_load(&old).unwrap();
    j.bulk_load(&new).unwrap();
    assert_eq!(j.run_retention().unwrap(), 50);
    assert_eq!(
        ids(&j),
        new.iter().map(|r| r.id.clone()).collect::<Vec<_>>()
    );
    check_indexes(&j);
}

#[test]
fn by_size() {
    let (_dir, j) = open_temp(options(none(), 10_000));
    fill(&j);
    let full = j.stats().unwrap().data_bytes;
    let per_record = full / 100;
    drop(j);
    let limit = full / 4;
    let (_dir, j) = open_temp(options(
        Retention {
            max_bytes: limit,
            ..none()
        },
        10_000,
    ));
    let recs = fill(&j);
    let deleted = j.run_retention().unwrap();
    let left = j.stats().unwrap().data_bytes;
    assert!(
        left <= limit && left + per_record * 2 > limit,
        "{left} vs {limit}"
    );
    assert_eq!(
        ids(&j),
        recs[deleted..]
            .iter()
            .map(|r| r.id.clone())
            .collect::<Vec<_>>()
    );
    check_indexes(&j);
    // The size counter follows upserts and deletions down to zero.
    let (_dir2, j2) = open_temp(options(
        Retention {
            max_records: 1,
            ..none()
        },
        3,
    ));
    fill(&j2);
    j2.run_retention().unwrap();
    assert_eq!(j2.len().unwrap(), 1);
    let last = ids(&j2).pop().unwrap();
    let rec = j2.get(&last).unwrap().unwrap();
    let cost = j2.stats().unwrap().data_bytes;
    assert_eq!(
        cost,
        row_cost(
            crate::test_util::stored_row(&j2, &last).len(),
            &index_keys(&rec)
        )
    );
}

#[tokio::test]
async fn undelivered_records_are_kept_until_the_bound() {
    let (_dir, j) = open_temp(options(
        Retention {
            max_records: 10,
            ..none()
        },
        7,
    ));
    let old = fill(&j); // before any sink: never queued
    j.register_sinks(&["ch".to_string()]).unwrap();
    let mut recs = Vec::new();
    for i in 0..30 {
        let rec = rec_at(now_ms() + i, "s", "t", "read", Status::Success);
        j.append(rec.clone()).await.unwrap();
        recs.push(rec);
    }
    assert_eq!(
        j.run_retention().unwrap(),
        100,
        "stops at the oldest undelivered"
    );
    assert_eq!(ids(&j).first(), Some(&recs[0].id));
    assert!(j.get(&old[99].id).unwrap().is_none());

    // Deliver 25: retention may now delete those, down to the limit of 10.
    let batch = j.sink_batch("ch", 25, usize::MAX).unwrap().unwrap();
    j.sink_delivered("ch", batch.last_seq, 25).unwrap();
    assert_eq!(j.run_retention().unwrap(), 20);
    assert_eq!(j.len().unwrap(), 10);
    check_indexes(&j);

    // Past max_undelivered_bytes, undelivered records go too, counted as dropped.
    drop(j);
    let (_dir, j) = open_temp(options(
        Retention {
            max_records: 2,
            max_undelivered_bytes: 1,
            ..none()
        },
        7,
    ));
    j.register_sinks(&["ch".to_string()]).unwrap();
    for i in 0..5 {
        j.append(rec_at(now_ms() + i, "s", "t", "read", Status::Success))
            .await
            .unwrap();
    }
    assert_eq!(j.run_retention().unwrap(), 3);
    let status = &j.sink_status().unwrap()[0];
    assert_eq!(status.state.dropped, 3);
    assert_eq!(status.backlog, 5, "the cursor did not move");
    assert_eq!(
        j.sink_batch("ch", 100, usize::MAX)
            .unwrap()
            .unwrap()
            .rows
            .len(),
        2
    );
    check_indexes(&j);
}

#[tokio::test]
async fn spawned_task_runs_and_stops_with_the_journal() {
    let mut opts = options(
        Retention {
            max_records: 5,
            ..none()
        },
        10_000,
    );
    opts.retention.interval = Duration::from_millis(20);
    let (_dir, j) = open_temp(opts);
    fill(&j);
    let task = j.spawn_retention();
    for _ in 0..200 {
        if j.len().unwrap() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(j.len().unwrap(), 5);
    drop(j);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

/// `n` records of about `size` bytes of arguments, `age_ms` old (spaced 1 ms apart).
fn big(n: u64, size: usize, age_ms: u64, session: &str) -> Vec<ActivityRecord> {
    let now = now_ms();
    (0..n)
        .map(|i| {
            let mut rec = rec_at(now - age_ms + i, "s", "t", "write", Status::Success);
            rec.arguments = Some(serde_json::json!({"blob": "x".repeat(size)}));
            rec.session_id = Some(session.to_owned());
            rec
        })
        .collect()
}

fn with_min_age(max_bytes: u64) -> JournalOptions {
    options(
        Retention {
            max_bytes,
            min_age: Duration::from_secs(3600),
            max_age: Duration::from_secs(30 * 24 * 3600),
            ..none()
        },
        10_000,
    )
}

#[test]
fn min_age_keeps_young_records_over_max_bytes_and_old_ones_still_go() {
    let (_dir, j) = open_temp(with_min_age(100_000));
    let old = big(50, 2000, 2 * DAY, "old");
    let young = big(200, 2000, 60_000, "flood");
    j.bulk_load(&old).unwrap();
    j.bulk_load(&young).unwrap();
    assert!(j.stats().unwrap().data_bytes > 400_000);
    // Every old record goes (over max_bytes and older than min_age); no young one does.
    assert_eq!(j.run_retention().unwrap(), 50);
    assert_eq!(j.len().unwrap(), 200 + 1, "the young records and the alert");
    assert!(j.get(&young[0].id).unwrap().is_some());
    assert!(j.get(&old[49].id).unwrap().is_none());
    assert!(j.under_pressure());
    check_indexes(&j);
    // Without min_age the same flood pushes everything else out.
    let (_dir, j) = open_temp(options(
        Retention {
            max_bytes: 100_000,
            ..none()
        },
        10_000,
    ));
    j.bulk_load(&young).unwrap();
    assert!(j.run_retention().unwrap() > 100);
    assert!(j.get(&young[0].id).unwrap().is_none());
    assert!(!j.under_pressure());
}

#[tokio::test]
async fn under_pressure_records_are_summarised_and_one_alert_is_written_per_episode() {
    let (_dir, j) = open_temp(with_min_age(100_000));
    let alerts = |j: &Journal| {
        j.query(
            &Filter {
                record_type: Some(RecordType::Alert),
                ..Filter::default()
            },
            100,
            0,
        )
        .unwrap()
        .records
    };
    // Not under pressure: stored in full.
    let full = big(1, 8000, 0, "s0").remove(0);
    j.append(full.clone()).await.unwrap();
    assert!(!j.get(&full.id).unwrap().unwrap().summarised);

    j.bulk_load(&big(100, 2000, 60_000, "flood")).unwrap();
    j.run_retention().unwrap();
    assert!(j.under_pressure());
    let first = alerts(&j);
    assert_eq!(first.len(), 1);
    let alert = &first[0];
    assert_eq!(alert.record_type, RecordType::Alert);
    assert_eq!(alert.status, Status::Error);
    let text = alert.error_message.as_deref().unwrap();
    assert!(text.contains("min_age_hours"), "{text}");
    assert!(text.contains("--session flood"), "{text}");
    assert_eq!(
        alert.details.as_ref().unwrap()["top_sessions"][0]["session_id"],
        "flood"
    );
    assert!(!alert.summarised);

    // Under pressure: new records are summarised, small, and keep their identity.
    let flood = big(1, 8000, 0, "flood").remove(0);
    j.append(flood.clone()).await.unwrap();
    let stored = j.get(&flood.id).unwrap().unwrap();
    assert!(stored.summarised);
    assert!(stored.arguments_truncated);
    assert!(serde_json::to_vec(&stored).unwrap().len() <= 2048);
    assert_eq!(stored.session_id, flood.session_id);
    assert_eq!(stored.status, flood.status);

    // Still under pressure: no second alert.
    j.run_retention().unwrap();
    assert_eq!(alerts(&j).len(), 1);
    drop(j);

    // A new episode after leaving pressure writes another alert.
    let (_dir, j) = open_temp(with_min_age(100_000));
    // 90 records: summarised with their chain fields (~1 KiB each) they fit in max_bytes.
    let flood = big(90, 2000, 60_000, "a");
    j.bulk_load(&flood).unwrap();
    j.run_retention().unwrap();
    assert!(j.under_pressure());
    assert_eq!(alerts(&j).len(), 1);
    // Leave: the flood's records are written again (their calls' outcomes), summarised
    // under pressure, which brings the journal back under max_bytes; the next pass finds
    // it within its limits, with nothing to delete.
    for rec in flood {
        j.upsert(rec).await.unwrap();
    }
    let data_bytes = j.stats().unwrap().data_bytes;
    assert!(data_bytes < 100_000, "{data_bytes}");
    assert_eq!(j.run_retention().unwrap(), 0);
    assert!(!j.under_pressure(), "back under its limits: pressure ends");
    assert_eq!(alerts(&j).len(), 1);
    // A new flood starts a new episode, with its own alert.
    j.bulk_load(&big(100, 2000, 30_000, "b")).unwrap();
    j.run_retention().unwrap();
    assert!(j.under_pressure());
    assert_eq!(alerts(&j).len(), 2);
}

#[test]
fn a_new_journal_is_not_compacted_when_reopened() {
    let (dir, j) = open_temp(options(none(), 10_000));
    let path = j.path().to_path_buf();
    drop(j);
    let fresh = std::fs::metadata(&path).unwrap().len();
    let j = Journal::open(&path, options(none(), 10_000)).unwrap();
    drop(j);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), fresh);
    drop(dir);
}

#[test]
fn reopening_compacts_a_file_retention_emptied() {
    let (dir, j) = open_temp(options(none(), 10_000));
    let path = j.path().to_path_buf();
    j.bulk_load(&big(4000, 2000, 60_000, "s")).unwrap();
    drop(j);
    let full = std::fs::metadata(&path).unwrap().len();
    let j = Journal::open(
        &path,
        options(
            Retention {
                max_records: 100,
                ..none()
            },
            10_000,
        ),
    )
    .unwrap();
    assert_eq!(j.run_retention().unwrap(), 3900);
    drop(j);
    let before = std::fs::metadata(&path).unwrap().len();
    assert!(before >= full / 2, "redb does not shrink on its own");
    let j = Journal::open(&path, options(none(), 10_000)).unwrap();
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after * 4 < before, "compacted: {before} -> {after} bytes");
    assert_eq!(j.len().unwrap(), 100);
    check_indexes(&j);
    drop((j, dir));
}
