//! Delivery: feeding the activity journal to sinks, one background task per sink.
//!
//! The other half of [`super::outbox`] (the per-sink cursors in the journal). Parts:
//! `sink` (the [`Sink`] trait a sink implements), `options` (batching and retry settings),
//! `tasks` (the set of running tasks, [`Delivery`]), `worker` (one sink's loop), `report`
//! (what `activity sinks` shows), and `tests`.
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

mod options;
use crate::DeliveryOptions;
mod report;
mod sink;
mod tasks;
mod worker;

#[cfg(test)]
mod tests;

pub use report::{Activity, Live, SinkReport, offline_report};
pub use sink::{Failure, Sink};
pub use tasks::Delivery;
