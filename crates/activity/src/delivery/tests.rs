//! Delivery end to end: sinks in memory that fail, stall, or run out of memory, fed from a
//! journal.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Delivery, DeliveryOptions, Failure, Sink};
use crate::record::{Status, now_ms};
use crate::test_util::{open_temp, rec_at};
use crate::{Journal, JournalOptions, SinkBatch};

/// A sink that stores ids in memory and fails while `failing` is above zero.
#[derive(Default)]
struct Memory {
    stored: Mutex<Vec<String>>,
    failing: AtomicUsize,
    attempts: AtomicUsize,
    /// If set: `deliver` waits for a message on it first, with this deadline declared.
    gate: Option<(Mutex<std::sync::mpsc::Receiver<()>>, Duration)>,
    /// If set: a batch of more records than this runs out of memory.
    holds_at_most: Option<usize>,
    /// The size of every batch handed over.
    sizes: Mutex<Vec<usize>>,
}

impl Sink for Memory {
    fn name(&self) -> &str {
        "memory"
    }

    fn deadline(&self) -> Option<Duration> {
        self.gate.as_ref().map(|(_, deadline)| *deadline)
    }

    fn deliver(&self, batch: &SinkBatch) -> Result<(), Failure> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        mcpproxy_support::lock(&self.sizes).push(batch.len());
        if self.holds_at_most.is_some_and(|most| batch.len() > most) {
            return Err(Failure {
                reason: "ran out of memory".into(),
                out_of_memory: true,
            });
        }
        if let Some((gate, _)) = &self.gate {
            // A closed gate (the test is over) lets it through too.
            let _ = mcpproxy_support::lock(gate).recv();
        }
        if self.failing.load(Ordering::SeqCst) > 0 {
            self.failing.fetch_sub(1, Ordering::SeqCst);
            return Err(String::from("remote down").into());
        }
        let mut stored = mcpproxy_support::lock(&self.stored);
        stored.extend(batch.rows.iter().map(|r| r.id.clone()));
        Ok(())
    }
}

fn fast() -> DeliveryOptions {
    DeliveryOptions {
        batch_records: 7,
        batch_bytes: 1 << 20,
        interval: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
    }
}

async fn wait_for(mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivers_in_order_exactly_once_through_failures() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let sink = Arc::new(Memory::default());
    sink.failing.store(3, Ordering::SeqCst);
    let delivery = Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
    let mut ids = Vec::new();
    for i in 0..50 {
        let rec = rec_at(now_ms() + i, "s", "t", "read", Status::Success);
        ids.push(rec.id.clone());
        j.append(rec).await.unwrap();
    }
    wait_for(|| mcpproxy_support::lock(&sink.stored).len() >= 50).await;
    assert_eq!(
        *mcpproxy_support::lock(&sink.stored),
        ids,
        "in order, each once"
    );
    assert!(sink.attempts.load(Ordering::SeqCst) >= 3 + 50 / 7);
    wait_for(|| delivery.report().unwrap()[0].status.backlog == 0).await;
    let report = &delivery.report().unwrap()[0];
    assert_eq!(report.status.state.delivered, 50);
    assert_eq!(report.status.state.failures, 0);
    assert_eq!(report.status.state.last_error, None);
    delivery.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_sink_is_reported_and_keeps_its_backlog() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let sink = Arc::new(Memory::default());
    sink.failing.store(usize::MAX, Ordering::SeqCst);
    let delivery = Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
    for i in 0..5 {
        j.append(rec_at(now_ms() + i, "s", "t", "read", Status::Success))
            .await
            .unwrap();
    }
    wait_for(|| sink.attempts.load(Ordering::SeqCst) >= 4).await;
    let report = &delivery.report().unwrap()[0];
    assert_eq!(report.status.backlog, 5);
    assert_eq!(
        report.status.state.last_error.as_deref(),
        Some("remote down")
    );
    assert!(report.status.state.failures >= 3);
    assert!(report.status.lag_ms.is_some());
    assert!(mcpproxy_support::lock(&sink.stored).is_empty());
    delivery.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_stuck_past_its_deadline_is_reported_and_its_batch_is_not_sent_twice() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let (release, gate) = std::sync::mpsc::channel();
    let sink = Arc::new(Memory {
        gate: Some((Mutex::new(gate), Duration::from_millis(20))),
        ..Memory::default()
    });
    // Filled before delivery starts, so the one batch holds all five (the gate opens
    // once: a second batch would wait on it forever).
    let ids = filled(&j, 5).await;
    let delivery = Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
    let stuck = |d: &Delivery| {
        d.report().unwrap()[0]
            .status
            .state
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("has not returned"))
    };
    wait_for(|| stuck(&delivery)).await;
    assert_eq!(
        sink.attempts.load(Ordering::SeqCst),
        1,
        "no second attempt while stuck"
    );
    assert_eq!(delivery.report().unwrap()[0].status.backlog, 5);
    release.send(()).unwrap();
    wait_for(|| delivery.report().unwrap()[0].status.backlog == 0).await;
    assert_eq!(
        *mcpproxy_support::lock(&sink.stored),
        ids,
        "delivered once, in order"
    );
    assert_eq!(sink.attempts.load(Ordering::SeqCst), 1);
    assert_eq!(delivery.report().unwrap()[0].status.state.last_error, None);
    delivery.shutdown(Duration::from_secs(5)).await;
}

/// Registers the `memory` sink and appends `n` records before delivery starts, so the
/// batches it gets are predictable.
async fn filled(j: &Journal, n: u64) -> Vec<String> {
    j.register_sinks(&["memory".to_owned()]).unwrap();
    let mut ids = Vec::new();
    for i in 0..n {
        let rec = rec_at(now_ms() + i, "s", "t", "read", Status::Success);
        ids.push(rec.id.clone());
        j.append(rec).await.unwrap();
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_too_big_for_the_sink_is_retried_in_halves_and_the_size_recovers() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let sink = Arc::new(Memory {
        holds_at_most: Some(3),
        ..Memory::default()
    });
    let ids = filled(&j, 20).await;
    let options = DeliveryOptions {
        batch_records: 16,
        ..fast()
    };
    let delivery =
        Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], options).unwrap();
    wait_for(|| delivery.report().unwrap()[0].status.backlog == 0).await;
    assert_eq!(
        *mcpproxy_support::lock(&sink.stored),
        ids,
        "in order, each once"
    );
    let sizes = mcpproxy_support::lock(&sink.sizes).clone();
    assert_eq!(
        sizes[..5],
        [16, 8, 4, 2, 2],
        "halved until it fits: {sizes:?}"
    );
    assert!(sizes[4..].iter().all(|&n| n == 2), "{sizes:?}");
    let report = &delivery.report().unwrap()[0];
    assert_eq!(
        report.status.state.failures, 0,
        "shrinking is not a failure"
    );
    assert_eq!(report.status.state.last_error, None);
    // Caught up: the next batch may be full-sized again.
    wait_for(|| delivery.report().unwrap()[0].live.batch_limit.is_none()).await;
    delivery.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_too_big_for_the_sink_alone_is_reported_with_the_fix_and_kept() {
    let (_dir, j) = open_temp(JournalOptions::default());
    let sink = Arc::new(Memory {
        holds_at_most: Some(0),
        ..Memory::default()
    });
    let ids = filled(&j, 5).await;
    let delivery = Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
    let error = || {
        delivery.report().unwrap()[0]
            .status
            .state
            .last_error
            .clone()
    };
    wait_for(|| error().is_some()).await;
    let error = error().unwrap_or_default();
    assert!(
        error.contains(&format!("record {} alone does not fit", ids[0])),
        "{error}"
    );
    assert!(
        error.contains("plugins.plugin_limits.memory.memory_mib"),
        "{error}"
    );
    assert_eq!(mcpproxy_support::lock(&sink.sizes)[..3], [5, 2, 1]);
    let report = &delivery.report().unwrap()[0];
    assert_eq!(report.status.backlog, 5, "nothing is dropped");
    assert_eq!(report.live.batch_limit, Some(1));
    assert!(mcpproxy_support::lock(&sink.stored).is_empty());
    delivery.shutdown(Duration::from_secs(5)).await;
}
