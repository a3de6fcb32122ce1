//! The running delivery tasks: [`Delivery`] registers the sinks in the journal, starts one
//! task per sink, joins their live state into the status report and stops them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::report::{Activity, Live, SinkReport, lock};
use super::worker::Worker;
use super::{DeliveryOptions, Sink};
use crate::{Error, Journal};

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
            let task = mcpproxy_support::lock(&running.task).take();
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
