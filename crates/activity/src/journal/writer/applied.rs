//! [`AppliedPuts`]: how far the writer has applied what was sent to it, which a read waits on
//! to see every write made before it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How many of the puts sent to the writer it has applied to the redb file, so a read can
/// wait to see the writes made before it. With the write-ahead log, sync mode acknowledges
/// a record once the log holds it and applies records to redb a moment later, in batches.
///
/// Puts are counted as they are sent (before the send) and as they are applied. The writer
/// takes puts in send order, so once it has applied as many as had been counted when a read
/// began, it has applied every put whose send finished before the read.
#[derive(Debug, Default)]
pub(in crate::journal) struct AppliedPuts {
    sent: AtomicU64,
    done: Mutex<u64>,
    changed: Condvar,
}

impl AppliedPuts {
    /// Counts a put about to be sent.
    pub(in crate::journal) fn sending(&self) {
        self.sent.fetch_add(1, Ordering::SeqCst);
    }

    /// The puts sent so far, and whether the writer has applied that many.
    pub(in crate::journal) fn caught_up(&self) -> (u64, bool) {
        let sent = self.sent.load(Ordering::SeqCst);
        (sent, self.done() >= sent)
    }

    /// The count of applied puts (a panic elsewhere cannot leave a `u64` half-written).
    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        mcpproxy_support::lock(&self.done)
    }

    fn done(&self) -> u64 {
        *self.lock()
    }

    /// Waits until `target` puts are applied, at most `timeout`; whether they are.
    pub(in crate::journal) fn wait_for(&self, target: u64, timeout: Duration) -> bool {
        let done = self.lock();
        let (done, _) = self
            .changed
            .wait_timeout_while(done, timeout, |done| *done < target)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *done >= target
    }

    /// Counts `n` puts as applied (written, or failed for good) and wakes waiting readers.
    pub(super) fn advance(&self, n: usize) {
        if n == 0 {
            return;
        }
        *self.lock() += n as u64;
        self.changed.notify_all();
    }
}
