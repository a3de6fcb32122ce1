//! What `mcpproxy activity sinks` and `GET /api/v1/activity/sinks` show about each sink:
//! the journal's view (cursor, backlog, lag, errors) joined with the live task's.

use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::super::{Error, Journal, SinkStatus};

/// What a sink's task is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    /// Caught up, waiting for new records.
    #[default]
    Idle,
    /// A batch is with the sink.
    Delivering,
    /// The last attempt failed; waiting to retry.
    BackingOff,
    /// Stopped (the proxy is shutting down).
    Stopped,
}

/// The live part of a sink's status (the rest is in the journal).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Live {
    pub activity: Activity,
    /// In `backing_off`: milliseconds until the next attempt.
    pub retry_in_ms: Option<u64>,
    /// How long the last successful batch took, in milliseconds, and its size.
    pub last_batch_ms: Option<u64>,
    pub last_batch_records: Option<usize>,
    /// While smaller than `batch_records`: the batch size in use after the sink ran out of
    /// memory (it returns to the full size once the sink is caught up).
    pub batch_limit: Option<usize>,
    pub granted_hosts: Vec<String>,
    #[serde(skip)]
    pub(super) retry_at: Option<Instant>,
}

/// One sink's full status: the journal's view (cursor, backlog, lag, errors) and the task's.
#[derive(Debug, Clone, Serialize)]
pub struct SinkReport {
    #[serde(flatten)]
    pub status: SinkStatus,
    #[serde(flatten)]
    pub live: Live,
}

/// The sinks' status from the journal alone (no delivery running in this process).
pub fn offline_report(journal: &Journal) -> Result<Vec<SinkReport>, Error> {
    Ok(journal
        .sink_status()?
        .into_iter()
        .map(|status| SinkReport {
            status,
            live: Live {
                activity: Activity::Stopped,
                ..Live::default()
            },
        })
        .collect())
}

pub(super) fn lock(live: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    mcpproxy_support::lock(live)
}
