//! Delivery: feeding the activity journal to sinks, one background task per sink.
//!
//! The other half of [`super::outbox`] (the per-sink cursors in the journal). Parts:
//! `worker` (one sink's loop), `report` (what `activity sinks` shows); this file has the
//! [`Sink`] trait, the options and the set of running tasks.
//!
//! Each task reads a batch after its sink's cursor (see [`super::outbox`]), hands
//! it to the sink on a blocking thread, and moves the cursor only after the sink said the
//! batch is stored. A failure (the sink's own error, a trap, a timeout) is recorded in the
//! journal and the same batch is retried after a wait that doubles from 1 s up to
//! `max_backoff`. Tool calls never wait for any of this: they only append to the journal.
//! A caught-up sink looks for new records every `interval`. A batch that makes the sink run
//! out of memory is retried at once as its first half, down to a single record, so a few
//! large records cannot stall a sink for good; the full batch size returns once it is
//! caught up.

mod report;
mod worker;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Error, Journal, SinkBatch};

use report::lock;
pub use report::{Activity, Live, SinkReport, offline_report};
use worker::Worker;

/// The first wait after a failed delivery; it doubles per failure up to `max_backoff`.
pub(crate) const INITIAL_BACKOFF: Duration = Duration::from_secs(1);

/// Why a sink did not store a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong, in words for the operator.
    pub reason: String,
    /// The sink ran out of memory on this batch: a smaller one may go through.
    pub out_of_memory: bool,
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Self {
            reason,
            out_of_memory: false,
        }
    }
}

/// Something that stores batches of records: a sink plugin, or a native one in tests.
pub trait Sink: Send + Sync + 'static {
    fn name(&self) -> &str;
    /// Stores `batch`, whole, or says why not. Blocking.
    fn deliver(&self, batch: &SinkBatch) -> Result<(), Failure>;
    /// The hosts it may reach, for the status report.
    fn granted_hosts(&self) -> Vec<String> {
        Vec::new()
    }
    /// How long one `deliver` should take at most. Code inside the sandbox is stopped at
    /// this deadline, but a wait inside a host call (a body write to a
    /// stalled remote, a guest's clock sleep) is not: past it the worker reports the sink as
    /// stuck instead of waiting silently.
    fn deadline(&self) -> Option<Duration> {
        None
    }
}

/// Batching and retry settings (config: `activity.delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryOptions {
    pub batch_records: usize,
    pub batch_bytes: usize,
    pub interval: Duration,
    pub max_backoff: Duration,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        Self {
            batch_records: 1000,
            batch_bytes: 4 << 20,
            interval: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}

struct Running {
    name: String,
    live: Arc<Mutex<Live>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// The delivery tasks of every configured sink.
pub struct Delivery {
    journal: Arc<Journal>,
    running: Vec<Running>,
    stop: CancellationToken,
}

impl Delivery {
    /// Registers `sinks` in the journal (dropping the cursors of sinks no longer configured,
    /// with a warning) and starts a task for each. Must be called inside a tokio runtime.
    pub fn start(
        journal: Arc<Journal>,
        sinks: Vec<Arc<dyn Sink>>,
        options: DeliveryOptions,
    ) -> Result<Self, Error> {
        let names: Vec<String> = sinks.iter().map(|s| s.name().to_owned()).collect();
        for (name, backlog) in journal.register_sinks(&names)? {
            tracing::warn!(
                sink = %name,
                "sink '{name}' is no longer configured: its cursor is dropped{}",
                if backlog > 0 {
                    format!(" and {backlog} records it had not delivered will not reach it")
                } else {
                    String::new()
                }
            );
        }
        let stop = CancellationToken::new();
        let running = sinks
            .into_iter()
            .map(|sink| {
                let live = Arc::new(Mutex::new(Live {
                    granted_hosts: sink.granted_hosts(),
                    ..Live::default()
                }));
                let worker = Worker {
                    journal: journal.clone(),
                    sink: sink.clone(),
                    options,
                    live: live.clone(),
                    stop: stop.clone(),
                };
                Running {
                    name: sink.name().to_owned(),
                    live,
                    task: Mutex::new(Some(tokio::spawn(worker.run()))),
                }
            })
            .collect();
        Ok(Self {
            journal,
            running,
            stop,
        })
    }

    /// The names of the sinks being fed.
    pub fn sinks(&self) -> impl Iterator<Item = &str> {
        self.running.iter().map(|r| r.name.as_str())
    }

    /// Every registered sink's status.
    pub fn report(&self) -> Result<Vec<SinkReport>, Error> {
        let statuses = self.journal.sink_status()?;
        Ok(statuses
            .into_iter()
            .map(|status| {
                let live = self
                    .running
                    .iter()
                    .find(|r| r.name == status.name)
                    .map(|r| {
                        let mut live = lock(&r.live).clone();
                        live.retry_in_ms = live.retry_at.map(|at| {
                            at.saturating_duration_since(Instant::now()).as_millis() as u64
                        });
                        live
                    })
                    .unwrap_or(Live {
                        activity: Activity::Stopped,
                        ..Live::default()
                    });
                SinkReport { status, live }
            })
            .collect())
    }

    /// Stops every task; a batch already with a sink gets up to `grace` to finish (so its
    /// cursor moves and it is not sent again on the next start).
    pub async fn shutdown(&self, grace: Duration) {
        self.stop.cancel();
        let deadline = tokio::time::Instant::now() + grace;
        for running in &self.running {
            let task = running
                .task
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            let Some(task) = task else { continue };
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                tracing::warn!(
                    sink = %running.name,
                    "sink '{}' was still delivering at shutdown; that batch is sent again on the next start",
                    running.name
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JournalOptions;
    use crate::record::{Status, now_ms};
    use crate::test_util::{open_temp, rec_at};
    use std::sync::atomic::{AtomicUsize, Ordering};

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
            self.sizes.lock().unwrap().push(batch.len());
            if self.holds_at_most.is_some_and(|most| batch.len() > most) {
                return Err(Failure {
                    reason: "ran out of memory".into(),
                    out_of_memory: true,
                });
            }
            if let Some((gate, _)) = &self.gate {
                // A closed gate (the test is over) lets it through too.
                let _ = gate.lock().unwrap().recv();
            }
            if self.failing.load(Ordering::SeqCst) > 0 {
                self.failing.fetch_sub(1, Ordering::SeqCst);
                return Err(String::from("remote down").into());
            }
            let mut stored = self.stored.lock().unwrap();
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
        let delivery =
            Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
        let mut ids = Vec::new();
        for i in 0..50 {
            let rec = rec_at(now_ms() + i, "s", "t", "read", Status::Success);
            ids.push(rec.id.clone());
            j.append(rec).await.unwrap();
        }
        wait_for(|| sink.stored.lock().unwrap().len() >= 50).await;
        assert_eq!(*sink.stored.lock().unwrap(), ids, "in order, each once");
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
        let delivery =
            Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
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
        assert!(sink.stored.lock().unwrap().is_empty());
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
        let delivery =
            Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
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
            *sink.stored.lock().unwrap(),
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
        assert_eq!(*sink.stored.lock().unwrap(), ids, "in order, each once");
        let sizes = sink.sizes.lock().unwrap().clone();
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
        let delivery =
            Delivery::start(j.clone(), vec![sink.clone() as Arc<dyn Sink>], fast()).unwrap();
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
        assert_eq!(sink.sizes.lock().unwrap()[..3], [5, 2, 1]);
        let report = &delivery.report().unwrap()[0];
        assert_eq!(report.status.backlog, 5, "nothing is dropped");
        assert_eq!(report.live.batch_limit, Some(1));
        assert!(sink.stored.lock().unwrap().is_empty());
        delivery.shutdown(Duration::from_secs(5)).await;
    }
}
