//! A clean journal of 100,000 records verifies, through everything a journal lives
//! through: records written in bulk, a restart, a writer killed with SIGKILL in the middle
//! of calls (this test binary, re-executed as the child, with calls going pending → final),
//! the records it left pending closed at the next open, and a retention prune. The time the
//! last `verify_chain` took is printed (a measure, not asserted).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcpproxy_activity::{
    ActivityRecord, Journal, JournalOptions, RecordType, Retention, Source, Status,
};
use serde_json::json;

const CHILD_DB: &str = "MCPPROXY_CHAIN_SCALE_DB";
const TOTAL: usize = 100_000;

fn record(i: usize, status: Status) -> ActivityRecord {
    let mut record = ActivityRecord::new(RecordType::ToolCall, Source::Mcp, "fs", "write_file");
    record.arguments = Some(json!({"path": format!("/srv/{i}"), "text": "x".repeat(i % 300)}));
    record.status = status;
    record.duration_ms = (i % 1000) as u64;
    record
}

fn options() -> JournalOptions {
    JournalOptions {
        retention: Retention {
            max_records: 90_000,
            min_age: Duration::ZERO,
            ..Retention::default()
        },
        checkpoint_idle: Duration::from_secs(3600),
        ..JournalOptions::default()
    }
}

fn bulk(path: &Path, from: usize, to: usize) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let journal = Journal::open(path, options()).unwrap();
    let records: Vec<ActivityRecord> = (from..to).map(|i| record(i, Status::Success)).collect();
    journal.bulk_load(&records).unwrap();
}

/// Child side: calls written pending, then final, by 4 tasks, each final record printed
/// `ACK` once durable, until the parent kills it. Does nothing unless run by the test.
#[test]
#[ignore = "child process of chain_scale"]
fn chain_scale_child() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let journal = Journal::open(Path::new(&path), options()).unwrap();
        let mut tasks = Vec::new();
        for t in 0..4 {
            let journal = journal.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..100_000 {
                    let mut call = record(t * 100_000 + i, Status::Pending);
                    journal.append(call.clone()).await.unwrap();
                    call.status = Status::Success;
                    journal.upsert(call).await.unwrap();
                    println!("ACK");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[test]
fn a_journal_of_100000_records_through_a_restart_a_kill_and_a_prune_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("activity.redb");
    // Written in bulk, closed, and opened again (a restart).
    bulk(&path, 0, 50_000);
    bulk(&path, 50_000, 97_000);

    // Calls through a writer killed with SIGKILL.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "chain_scale_child", "--nocapture"])
        .env(CHILD_DB, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = 0;
    for line in BufReader::new(stdout).lines() {
        if line.unwrap().contains("ACK") {
            acked += 1;
        }
        if acked == 2_000 {
            child.kill().unwrap();
        }
    }
    child.wait().unwrap();
    assert!(acked >= 2_000, "the child acknowledged {acked} calls");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let journal = Journal::open(&path, options()).unwrap();
        // What the server does at start: the calls the kill cut off are closed (chained).
        journal.close_interrupted().await.unwrap();
        let report = journal.verify_chain(None, None).unwrap();
        assert!(report.ok, "{:#?}", report.problems);
        assert_eq!(report.pending, 0);
        let records = journal.len().unwrap() as usize;
        assert!(records >= 99_000, "{records}");
        // Up to 100,000 and more, then a prune to 90,000.
        let more: Vec<ActivityRecord> = (records..TOTAL + 1000)
            .map(|i| record(i, Status::Success))
            .collect();
        journal.bulk_load(&more).unwrap();
        let before = journal.len().unwrap();
        assert!(before > TOTAL as u64);
        let deleted = journal.run_retention().unwrap();
        assert!(deleted > 0 && journal.len().unwrap() <= 90_000, "{deleted}");

        let started = Instant::now();
        let report = journal.verify_chain(None, None).unwrap();
        let took = started.elapsed();
        assert!(report.ok, "{:#?}", report.problems);
        assert!(report.pruned >= deleted as u64, "{report:?}");
        assert_eq!(report.chained, journal.len().unwrap());
        eprintln!(
            "verify_chain: {} records ({} chained, {} pruned before the anchor) in {took:?}",
            report.records, report.chained, report.pruned
        );
    });
}
