//! What delivery hands batches to: the [`Sink`] trait, and the [`Failure`] a sink answers
//! with when it did not store a batch.

use std::time::Duration;

use crate::SinkBatch;

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
