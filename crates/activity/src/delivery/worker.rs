//! One sink's delivery loop: read a batch after the cursor, hand it to the sink on a
//! blocking thread, move the cursor once it is stored; back off and retry on failure.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::super::Journal;
use super::options::INITIAL_BACKOFF;
use super::report::{Activity, Live, lock};
use super::{DeliveryOptions, Sink};

/// How long past its `deadline` a sink's batch may run before it is reported as stuck:
/// the deadline plus as much again, at most 5 s more.
pub(super) fn overrun_after(deadline: Duration) -> Duration {
    deadline + deadline.min(Duration::from_secs(5))
}

/// One sink's loop.
pub(super) struct Worker {
    pub(super) journal: Arc<Journal>,
    pub(super) sink: Arc<dyn Sink>,
    pub(super) options: DeliveryOptions,
    pub(super) live: Arc<Mutex<Live>>,
    pub(super) stop: CancellationToken,
}

enum Step {
    /// Delivered a batch (or skipped gone records), or shrank the batch after the sink ran
    /// out of memory: look again at once.
    Progress,
    /// Nothing to deliver.
    CaughtUp,
    /// The sink failed; wait before retrying.
    Failed,
}

impl Worker {
    pub(super) async fn run(self) {
        let name = self.sink.name().to_owned();
        let mut backoff = INITIAL_BACKOFF.min(self.options.max_backoff);
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            let wait = match self.step().await {
                Step::Progress => {
                    backoff = INITIAL_BACKOFF.min(self.options.max_backoff);
                    continue;
                }
                Step::CaughtUp => {
                    backoff = INITIAL_BACKOFF.min(self.options.max_backoff);
                    self.set(|live| {
                        live.activity = Activity::Idle;
                        live.batch_limit = None;
                    });
                    self.options.interval
                }
                Step::Failed => {
                    let wait = backoff;
                    backoff = (backoff * 2).min(self.options.max_backoff);
                    self.set(|live| {
                        live.activity = Activity::BackingOff;
                        live.retry_at = Some(Instant::now() + wait);
                    });
                    wait
                }
            };
            tokio::select! {
                _ = self.stop.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            self.set(|live| live.retry_at = None);
        }
        self.set(|live| live.activity = Activity::Stopped);
        tracing::debug!(sink = %name, "delivery stopped");
    }

    fn set(&self, change: impl FnOnce(&mut Live)) {
        change(&mut lock(&self.live));
    }

    /// Says, in the log and in the sink's status, that a batch has overrun its deadline.
    async fn report_stuck(&self, name: &str, count: usize, waited: Duration) {
        let reason = format!(
            "sink '{name}' has not returned {} ms after it was handed {count} records, past its \
             deadline: it is blocked inside a host call (a connection or a write to a remote \
             that does not answer); delivery waits for it, then retries with backoff",
            waited.as_millis()
        );
        tracing::error!(sink = %name, "{reason}");
        let journal = self.journal.clone();
        let sink = name.to_owned();
        let recorded =
            tokio::task::spawn_blocking(move || journal.sink_failed(&sink, &reason)).await;
        if let Ok(Err(e)) = recorded {
            tracing::error!("cannot record the sink failure: {e}");
        }
    }

    async fn step(&self) -> Step {
        let name = self.sink.name().to_owned();
        let journal = self.journal.clone();
        let records = lock(&self.live)
            .batch_limit
            .unwrap_or(self.options.batch_records);
        let bytes = self.options.batch_bytes;
        let batch = {
            let name = name.clone();
            tokio::task::spawn_blocking(move || journal.sink_batch(&name, records, bytes)).await
        };
        let batch = match batch {
            Ok(Ok(Some(batch))) => batch,
            Ok(Ok(None)) => return Step::CaughtUp,
            Ok(Err(e)) => {
                tracing::error!(sink = %name, "cannot read the next batch from the journal: {e}");
                return Step::Failed;
            }
            Err(e) => {
                tracing::error!(sink = %name, "the batch reader failed: {e}");
                return Step::Failed;
            }
        };
        let count = batch.len();
        let last_seq = batch.last_seq;
        let batch_first_id = batch.first_id().map(str::to_owned);
        let result = if batch.is_empty() {
            Ok(())
        } else {
            self.set(|live| live.activity = Activity::Delivering);
            let sink = self.sink.clone();
            let started = Instant::now();
            let deadline = self.sink.deadline();
            let mut call = tokio::task::spawn_blocking(move || sink.deliver(&batch));
            let joined = match deadline.map(overrun_after) {
                None => call.await,
                Some(watchdog) => match tokio::time::timeout(watchdog, &mut call).await {
                    Ok(joined) => joined,
                    Err(_) => {
                        self.report_stuck(&name, count, watchdog).await;
                        // Its instance is still running: wait for it and keep its result, so
                        // a batch that does land is not sent twice.
                        call.await
                    }
                },
            };
            let result = joined
                .unwrap_or_else(|e| Err(format!("the sink's delivery thread failed: {e}").into()));
            if result.is_ok() {
                let took = started.elapsed().as_millis() as u64;
                self.set(|live| {
                    live.last_batch_ms = Some(took);
                    live.last_batch_records = Some(count);
                });
            }
            result
        };
        let journal = self.journal.clone();
        match result {
            Ok(()) => {
                let sink_name = name.clone();
                tokio::task::spawn_blocking(move || {
                    journal.sink_delivered(&sink_name, last_seq, count as u64)
                })
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()))
                .map(|()| Step::Progress)
                .unwrap_or_else(|e| {
                    // Delivered but not recorded: the batch goes again; ids let the remote
                    // drop the duplicates.
                    tracing::error!(sink = %name, "delivered {count} records but cannot move the cursor: {e}");
                    Step::Failed
                })
            }
            Err(failure) if failure.out_of_memory && count > 1 => {
                let half = count / 2;
                tracing::warn!(
                    sink = %name,
                    "sink '{name}' ran out of memory on {count} records ({}); retrying them \
                     {half} at a time",
                    failure.reason
                );
                self.set(|live| live.batch_limit = Some(half));
                Step::Progress
            }
            Err(failure) => {
                let reason = if failure.out_of_memory {
                    let id = batch_first_id.as_deref().unwrap_or("?");
                    format!(
                        "{}: record {id} alone does not fit in the sink's memory; raise \
                         plugins.plugin_limits.{name}.memory_mib (or lower \
                         activity.max_argument_bytes for new records)",
                        failure.reason
                    )
                } else {
                    failure.reason
                };
                tracing::warn!(
                    sink = %name,
                    records = count,
                    "sink '{name}' could not deliver {count} records; retrying with backoff: {reason}"
                );
                let name = name.clone();
                let recorded =
                    tokio::task::spawn_blocking(move || journal.sink_failed(&name, &reason)).await;
                if let Ok(Err(e)) = recorded {
                    tracing::error!("cannot record the sink failure: {e}");
                }
                Step::Failed
            }
        }
    }
}
