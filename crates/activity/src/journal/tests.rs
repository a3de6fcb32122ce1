//! Unit tests of the journal: writes, upserts and their index entries, corrupt rows, group
//! commit under concurrency, Async mode, the bounded queue, and reopening.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::writer::latest_per_key;
use super::writer::{Put, commit_puts};
use super::*;
use crate::Error;
use crate::record::ActivityRecord;
use crate::record::{Status, new_id, now_ms};
use crate::test_util::{check_indexes, open_temp, rec_at};
use crate::{Filter, RecordType, Source};
use std::sync::Arc;
use std::time::Duration;

/// The records whose status is `status`, newest first (at most 1,000).
fn with_status(j: &Journal, status: &str) -> Vec<ActivityRecord> {
    let filter = Filter {
        status: Some(
            Filter::STATUSES
                .into_iter()
                .find(|s| s.as_str() == status)
                .expect("a status"),
        ),
        ..Filter::default()
    };
    j.query(&filter, 1000, 0).unwrap().records
}

#[tokio::test]
async fn append_get_upsert_keep_indexes_right() {
    let (_dir, j) = open_temp(JournalOptions::default());
    assert!(j.is_empty().unwrap());
    let mut rec = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "github", "create");
    rec.tool_variant = Some(mcpproxy_policy::OperationType::Write);
    j.append(rec.clone()).await.unwrap();
    assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(&rec));
    assert_eq!(with_status(&j, "pending"), vec![rec.clone()]);
    check_indexes(&j);

    rec.status = Status::Success;
    rec.duration_ms = 42;
    rec.server_name = "gitlab".into();
    j.upsert(rec.clone()).await.unwrap();
    assert_eq!(j.len().unwrap(), 1);
    assert_eq!(j.get(&rec.id).unwrap().as_ref(), Some(&rec));
    assert!(with_status(&j, "pending").is_empty());
    assert_eq!(with_status(&j, "success"), vec![rec.clone()]);
    let github = Filter {
        server: Some("github".into()),
        ..Filter::default()
    };
    assert!(j.query(&github, 10, 0).unwrap().records.is_empty());
    check_indexes(&j);

    // submit is a fire-and-forget upsert.
    rec.status = Status::Error;
    j.submit(rec.clone());
    j.flush().await.unwrap();
    assert_eq!(j.get(&rec.id).unwrap().unwrap().status, Status::Error);
    check_indexes(&j);

    let stats = j.stats().unwrap();
    assert_eq!(stats.records, 1);
    assert_eq!(stats.oldest.as_deref(), Some(rec.timestamp.as_str()));
    assert!(stats.file_bytes > 0 && stats.data_bytes > 0);
}

#[tokio::test]
async fn interrupted_calls_are_closed_at_startup_and_queued_for_sinks() {
    let (_dir, j) = open_temp(JournalOptions::default());
    j.register_sinks(&["s".to_string()]).unwrap();
    let left = rec_at(now_ms(), "s", "t", "write", Status::Pending);
    j.append(left.clone()).await.unwrap();
    let done = rec_at(now_ms() + 1, "s", "t", "read", Status::Success);
    j.append(done.clone()).await.unwrap();
    assert_eq!(j.close_interrupted().await.unwrap(), 1);
    let closed = j.get(&left.id).unwrap().unwrap();
    assert_eq!(closed.status, Status::Error);
    assert!(closed.error_message.unwrap().contains("unknown"));
    assert_eq!(j.get(&done.id).unwrap().unwrap(), done);
    assert_eq!(j.close_interrupted().await.unwrap(), 0);
    let batch = j.sink_batch("s", 10, 1 << 20).unwrap().unwrap();
    assert_eq!(
        batch.rows.len(),
        2,
        "the closed record goes to the sinks too"
    );
    check_indexes(&j);
}

#[tokio::test]
async fn a_records_puts_in_one_batch_are_written_once_as_the_last() {
    let (_dir, j) = open_temp(JournalOptions::default());
    j.register_sinks(&["s".to_string()]).unwrap();
    let pending = rec_at(now_ms(), "s", "t", "read", Status::Pending);
    let other = rec_at(now_ms() + 1, "s", "u", "read", Status::Success);
    let mut done = pending.clone();
    done.status = Status::Success;
    done.duration_ms = 7;
    let puts: Vec<Put> = [&pending, &other, &done]
        .into_iter()
        .map(|r| Put::new(r, false).unwrap())
        .collect();
    let latest = latest_per_key(&puts);
    assert_eq!(
        latest.len(),
        2,
        "the pending put is replaced by the finished one"
    );
    assert_eq!(latest[0].key, puts[1].key, "queue order is kept");
    assert_eq!(latest[1].key, puts[2].key);
    commit_puts(
        &j.db().unwrap(),
        &latest,
        redb::Durability::Immediate,
        true,
        &j.chain,
    )
    .unwrap();
    assert_eq!(j.get(&done.id).unwrap().as_ref(), Some(&done));
    assert!(with_status(&j, "pending").is_empty());
    assert_eq!(with_status(&j, "success").len(), 2);
    check_indexes(&j);
    let batch = j.sink_batch("s", 10, 1 << 20).unwrap().unwrap();
    let ids: Vec<&str> = batch.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [other.id.as_str(), done.id.as_str()],
        "each record queued once"
    );
}

#[tokio::test]
async fn in_async_mode_a_call_queued_pending_then_finished_reads_back_finished() {
    let (_dir, j) = open_temp(JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_millis(20),
        },
        ..JournalOptions::default()
    });
    let mut records = Vec::new();
    for i in 0..50 {
        let pending = rec_at(now_ms() + i, "s", "t", "read", Status::Pending);
        let mut done = pending.clone();
        done.status = if i % 2 == 0 {
            Status::Success
        } else {
            Status::Error
        };
        j.submit(pending);
        j.submit(done.clone());
        records.push(done);
    }
    j.flush().await.unwrap();
    for done in &records {
        assert_eq!(j.get(&done.id).unwrap().as_ref(), Some(done));
    }
    assert!(with_status(&j, "pending").is_empty());
    check_indexes(&j);
}

#[tokio::test]
async fn bad_ids_and_corrupt_rows_do_not_panic() {
    let (_dir, j) = open_temp(JournalOptions::default());
    assert!(matches!(j.get("nope"), Err(Error::InvalidId(_))));
    assert!(j.get("").is_err());
    let msg = j
        .get("ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("expected a 26-character ULID"), "{msg}");
    assert_eq!(j.get(&new_id().0).unwrap(), None);
    let bad = ActivityRecord {
        id: "not-a-ulid".into(),
        ..Default::default()
    };
    assert!(matches!(
        j.append(bad.clone()).await,
        Err(Error::InvalidId(_))
    ));
    j.submit(bad.clone()); // encoded by the writer: logged, not written
    j.flush().await.unwrap();
    // Counted as done, so a read does not wait for it.
    assert!(j.applied.caught_up().1);
    assert_eq!(j.len().unwrap(), 0);

    // In async mode the writer encodes every record: a bad one is logged and skipped, and
    // the good one queued after it is written.
    let (_dir, queued) = open_temp(JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_secs(60),
        },
        ..JournalOptions::default()
    });
    queued.append(bad.clone()).await.unwrap();
    queued.submit(bad);
    let fine = rec_at(now_ms(), "s", "t", "read", Status::Success);
    queued.append(fine.clone()).await.unwrap();
    queued.flush().await.unwrap();
    assert_eq!(queued.len().unwrap(), 1);
    assert_eq!(queued.get(&fine.id).unwrap(), Some(fine));

    // A corrupt row: get reports it, queries skip it, upserts and retention replace it.
    let good = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.append(good.clone()).await.unwrap();
    let (corrupt_id, _) = new_id();
    {
        let txn = j.db().unwrap().begin_write().unwrap();
        txn.open_table(RECORDS)
            .unwrap()
            .insert(parse_key(&corrupt_id).unwrap(), b"{not json".as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    assert!(matches!(j.get(&corrupt_id), Err(Error::Corrupt { .. })));
    let page = j.query(&Filter::default(), 10, 0).unwrap();
    assert_eq!(page.records, vec![good]);
    let fixed = ActivityRecord {
        id: corrupt_id.clone(),
        ..rec_at(1, "s", "t", "read", Status::Error)
    };
    j.upsert(fixed.clone()).await.unwrap();
    assert_eq!(j.get(&corrupt_id).unwrap(), Some(fixed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_under_concurrency() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let mut tasks = Vec::new();
    for t in 0..64 {
        let j = j.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..50 {
                let rec = ActivityRecord::new(
                    RecordType::ToolCall,
                    Source::Mcp,
                    format!("server{}", t % 4),
                    format!("tool{i}"),
                );
                ids.push(rec.id.clone());
                j.append(rec).await.unwrap();
            }
            ids
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    assert_eq!(all.len(), 3200);
    assert_eq!(j.len().unwrap(), 3200);
    for id in &all {
        assert!(j.get(id).unwrap().is_some(), "{id} missing");
    }
    let server0 = Filter {
        server: Some("server0".into()),
        ..Filter::default()
    };
    let page = j.query(&server0, 1000, 0).unwrap();
    assert_eq!(page.records.len(), 800);
    assert!(!page.has_more);
    check_indexes(&j);
}

/// A sync-mode journal without a write-ahead log whose unawaited records wait up to
/// `carry`, and the commits it has made so far (counted by its commit observer). (With the
/// log, see `log_tests`.)
fn sync_counting_commits(carry: Duration) -> (tempfile::TempDir, Arc<Journal>, Arc<AtomicUsize>) {
    let commits = Arc::new(AtomicUsize::new(0));
    let counter = commits.clone();
    let (dir, j) = open_temp(JournalOptions {
        sync_carry: carry,
        log_capacity: 0,
        on_commit: Some(CommitObserver(Arc::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        }))),
        ..JournalOptions::default()
    });
    (dir, j, commits)
}

/// Whether the record `id` can be read within `attempts` looks 5 ms apart.
pub(super) async fn stored_within(j: &Journal, id: &str, attempts: usize) -> bool {
    for _ in 0..attempts {
        if j.get(id).unwrap().is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

#[tokio::test]
async fn without_a_log_unawaited_records_share_the_next_awaited_ones_commit() {
    // A window far longer than the test: only an awaited record or a flush ends it.
    let (_dir, j, commits) = sync_counting_commits(Duration::from_secs(600));
    let finished = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.submit(finished.clone());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(commits.load(Ordering::SeqCst), 0, "committed alone");
    // The next call's pending record is awaited: one commit holds both.
    let pending = rec_at(now_ms(), "s", "t", "read", Status::Pending);
    j.append(pending.clone()).await.unwrap();
    assert_eq!(commits.load(Ordering::SeqCst), 1);
    assert!(j.get(&finished.id).unwrap().is_some());
    assert!(j.get(&pending.id).unwrap().is_some());
    // A flush ends the window too (the test would wait 600 s otherwise).
    let another = rec_at(now_ms(), "s", "t", "read", Status::Error);
    j.submit(another.clone());
    tokio::time::timeout(Duration::from_secs(60), j.flush())
        .await
        .expect("the flush ended the window")
        .unwrap();
    assert!(j.get(&another.id).unwrap().is_some());
    assert_eq!(commits.load(Ordering::SeqCst), 2);
    check_indexes(&j);
}

#[tokio::test]
async fn without_a_log_an_unawaited_record_alone_is_committed_after_the_window() {
    let (_dir, j, commits) = sync_counting_commits(Duration::from_millis(10));
    let finished = rec_at(now_ms(), "s", "t", "read", Status::Success);
    j.submit(finished.clone());
    assert!(
        stored_within(&j, &finished.id, 2_000).await,
        "the record was never committed"
    );
    assert_eq!(commits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn async_mode_commits_in_background_and_on_flush() {
    let options = JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_millis(20),
        },
        ..JournalOptions::default()
    };
    let (dir, j) = open_temp(options.clone());
    let path = j.path().to_path_buf();
    let mut ids = Vec::new();
    for i in 0..500 {
        let rec = rec_at(
            now_ms(),
            "s",
            &format!("t{}", i % 7),
            "write",
            Status::Success,
        );
        ids.push(rec.id.clone());
        j.append(rec).await.unwrap();
    }
    j.flush().await.unwrap();
    assert_eq!(j.len().unwrap(), 500);
    // Background commits make later appends visible without a flush.
    let late = rec_at(now_ms(), "s", "late", "read", Status::Success);
    j.append(late.clone()).await.unwrap();
    assert!(
        stored_within(&j, &late.id, 200).await,
        "async record never committed"
    );
    drop(j);
    let j = Journal::open(&path, options).unwrap();
    assert_eq!(j.len().unwrap(), 501);
    for id in &ids {
        assert!(j.get(id).unwrap().is_some());
    }
    check_indexes(&j);
    drop(dir);
}

#[tokio::test]
async fn close_interrupted_closes_each_pending_record_once_in_async_mode() {
    let options = JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_secs(3600),
        },
        ..JournalOptions::default()
    };
    let (_dir, j) = open_temp(options);
    for i in 0..2500u64 {
        let status = if i % 5 == 0 {
            Status::Success
        } else {
            Status::Pending
        };
        j.append(rec_at(now_ms() + i, "s", "t", "write", status))
            .await
            .unwrap();
    }
    j.flush().await.unwrap();
    // 2,000 pending over three pages; each is closed once even though async upserts
    // are acknowledged before they are committed.
    assert_eq!(j.close_interrupted().await.unwrap(), 2000);
    let pending = Filter {
        status: Some(Status::Pending),
        ..Filter::default()
    };
    assert!(j.query(&pending, 10, 0).unwrap().records.is_empty());
    let errors = Filter {
        status: Some(Status::Error),
        ..Filter::default()
    };
    let page = j.query(&errors, 10, 0).unwrap();
    assert!(
        page.records[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("stopped before")
    );
    assert_eq!(j.len().unwrap(), 2500);
    assert_eq!(j.close_interrupted().await.unwrap(), 0);
    check_indexes(&j);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_mode_bounds_the_queue_and_loses_nothing() {
    let options = JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_secs(3600),
        },
        ..JournalOptions::default()
    };
    let (_dir, j) = open_temp(options);
    let mut tasks = Vec::new();
    for t in 0..64 {
        let j = j.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..400 {
                let tool = format!("t{i}");
                j.append(rec_at(
                    now_ms(),
                    &format!("s{t}"),
                    &tool,
                    "read",
                    Status::Success,
                ))
                .await
                .unwrap();
                assert!(j.slots.available_permits() <= MAX_QUEUED);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    j.flush().await.unwrap();
    assert_eq!(j.len().unwrap(), 64 * 400);
    assert_eq!(
        j.slots.available_permits(),
        MAX_QUEUED,
        "every slot released"
    );
}

#[tokio::test]
async fn reopen_after_drop_keeps_everything() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let path = j.path().to_path_buf();
    let recs: Vec<_> = (0..100)
        .map(|i| rec_at(1_700_000_000_000 + i, "s", "t", "read", Status::Success))
        .collect();
    for rec in &recs {
        j.append(rec.clone()).await.unwrap();
    }
    drop(j);
    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    assert_eq!(j.len().unwrap(), 100);
    let page = j.query(&Filter::default(), 1000, 0).unwrap();
    let want: Vec<_> = recs.iter().rev().cloned().collect();
    assert_eq!(page.records, want);
    // Still writable after reopening.
    j.append(rec_at(now_ms(), "s", "t", "read", Status::Success))
        .await
        .unwrap();
    assert_eq!(j.len().unwrap(), 101);
}

/// A journal many times larger than its page cache ([`DEFAULT_CACHE_BYTES`] is small, so a
/// proxy that has run for a while is always in this state) still answers every query right,
/// after a reopen too: pages evicted from the cache are read back from the file.
#[tokio::test]
async fn a_journal_far_larger_than_its_cache_answers_right() {
    let options = || JournalOptions {
        durability: Durability::Async {
            flush: Duration::from_millis(50),
        },
        cache_bytes: 64 << 10,
        ..JournalOptions::default()
    };
    let (_dir, j) = open_temp(options());
    let recs: Vec<_> = (0..3000)
        .map(|i| {
            let status = if i % 10 == 0 {
                Status::Error
            } else {
                Status::Success
            };
            rec_at(1_700_000_000_000 + i, "s", "t", "read", status)
        })
        .collect();
    for rec in &recs {
        j.append(rec.clone()).await.unwrap();
    }
    j.flush().await.unwrap();
    assert!(
        j.stats().unwrap().file_bytes > 20 * (64 << 10),
        "file ≫ cache"
    );
    let path = j.path().to_path_buf();
    drop(j);
    let j = Journal::open(&path, options()).unwrap();
    assert_eq!(j.len().unwrap(), 3000);
    let newest: Vec<_> = recs.iter().rev().take(50).cloned().collect();
    assert_eq!(j.query(&Filter::default(), 50, 0).unwrap().records, newest);
    let errors = with_status(&j, "error");
    assert_eq!(errors.len(), 300);
    assert_eq!(j.get(&recs[0].id).unwrap().as_ref(), Some(&recs[0]));
    check_indexes(&j);
}

#[tokio::test]
async fn a_replicas_journal_names_it_on_every_record_put() {
    let options = JournalOptions {
        replica: Some("replica-1".into()),
        ..JournalOptions::default()
    };
    let (_dir, j) = open_temp(options);
    let rec = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "read");
    j.append(rec.clone()).await.unwrap();
    let submitted = ActivityRecord::new(RecordType::Alert, Source::Proxy, "", "");
    j.submit(submitted.clone());
    // A record that names its replica keeps it.
    let mut other = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "read");
    other.replica = Some("replica-2".into());
    j.upsert(other.clone()).await.unwrap();
    j.flush().await.unwrap();
    let replica = |id: &str| j.get(id).unwrap().unwrap().replica;
    assert_eq!(replica(&rec.id).as_deref(), Some("replica-1"));
    assert_eq!(replica(&submitted.id).as_deref(), Some("replica-1"));
    assert_eq!(replica(&other.id).as_deref(), Some("replica-2"));
    let only = Filter {
        replica: Some("replica-1".into()),
        ..Filter::default()
    };
    assert_eq!(j.query(&only, 10, 0).unwrap().records.len(), 2);
}
