//! Crash tests of the journal: a child process (this test binary, re-executed) writes until it
//! is killed with SIGKILL; the parent then checks that every acknowledged record survived.

use super::*;
use crate::record::{Status, now_ms};
use crate::test_util::{check_indexes, padded_read, rec_at};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::time::Duration;

const CRASH_DB: &str = "MCPPROXY_ACTIVITY_CRASH_DB";
const CRASH_MODE: &str = "MCPPROXY_ACTIVITY_CRASH_MODE";
const CRASH_LOG_CAPACITY: &str = "MCPPROXY_ACTIVITY_CRASH_LOG_CAPACITY";

/// Child side of the crash tests: appends until killed, printing `ACK <id>` per acked
/// (Sync) or flushed (Async) record. Does nothing unless run by `crash_*` below.
#[test]
#[ignore = "child process of the crash tests"]
fn crash_child_writer() {
    let Ok(path) = std::env::var(CRASH_DB) else {
        return;
    };
    let sync = std::env::var(CRASH_MODE).as_deref() != Ok("async");
    let durability = if sync {
        Durability::Sync
    } else {
        Durability::Async {
            flush: Duration::from_secs(3600),
        }
    };
    let log_capacity = std::env::var(CRASH_LOG_CAPACITY)
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(DEFAULT_LOG_CAPACITY);
    let options = JournalOptions {
        durability,
        log_capacity,
        // Only a full log checkpoints: what the kill leaves in it must be replayed.
        checkpoint_idle: Duration::from_secs(3600),
        ..JournalOptions::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let j = Journal::open(Path::new(&path), options).unwrap();
        if !sync {
            let mut ids = Vec::new();
            for i in 0..500 {
                let rec = rec_at(now_ms(), "s", &format!("t{i}"), "write", Status::Success);
                ids.push(rec.id.clone());
                j.append(rec).await.unwrap();
            }
            j.flush().await.unwrap();
            for id in ids {
                println!("ACK {id}");
            }
        }
        // Keep writing (Sync: acked and printed; Async: never flushed) until killed.
        let mut tasks = Vec::new();
        for t in 0..8 {
            let j = j.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..100_000 {
                    let rec = padded_read(&format!("s{t}"), &format!("t{i}"), 200);
                    let id = rec.id.clone();
                    j.append(rec).await.unwrap();
                    if sync {
                        println!("ACK {id}");
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// Runs the child writer, kills it with SIGKILL after `after` acks (Sync) or once it
/// printed its flushed ids (Async), then checks every acked id survived. Returns how many
/// records the reopened journal restored from its write-ahead log.
fn crash_round(mode: &str, after: usize, log_capacity: u64) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let exe = std::env::current_exe().unwrap();
    let mut child = Process::new(exe)
        .args([
            "--ignored",
            "--exact",
            "journal::crash_tests::crash_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_DB, &path)
        .env(CRASH_MODE, mode)
        .env(CRASH_LOG_CAPACITY, log_capacity.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = Vec::new();
    let mut killed = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        // libtest may print "test NAME ... " on the same line as the first output.
        if let Some(at) = line.find("ACK ") {
            acked.push(line[at + 4..].trim().to_string());
        }
        if !killed && acked.len() >= after {
            child.kill().unwrap(); // SIGKILL; keep reading what it printed before dying
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(
        killed,
        "child exited ({status}) after only {} acks",
        acked.len()
    );
    let j = Journal::open(&path, JournalOptions::default()).unwrap();
    let missing: Vec<_> = acked
        .iter()
        .filter(|id| j.get(id).unwrap().is_none())
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acked ids lost: {missing:?}",
        missing.len(),
        acked.len()
    );
    check_indexes(&j);
    j.restored_from_log()
}

#[test]
fn crash_loses_no_acked_record_sync() {
    // The acknowledged records since the last checkpoint were only in the log (redb's
    // unsynced commits die with the process): the replay must bring them back.
    let restored = crash_round("sync", 400, DEFAULT_LOG_CAPACITY);
    assert!(
        restored > 0,
        "nothing was restored from the write-ahead log"
    );
}

#[test]
fn crash_loses_no_acked_record_sync_with_a_log_that_keeps_starting_over() {
    // The smallest log holds ~100 of these records: the kill lands among checkpoints.
    crash_round("sync", 1500, 1);
}

#[test]
fn crash_loses_no_acked_record_sync_without_a_log() {
    crash_round("sync", 400, 0);
}

#[test]
fn crash_loses_no_flushed_record_async() {
    crash_round("async", 500, DEFAULT_LOG_CAPACITY);
}
