//! Waiting for a free instance slot. The engine's pooling allocator holds a fixed number of
//! instances (`max_instances`, 256 by default); when every slot is in use, instantiation
//! fails at once. A call then waits here, woken whenever a plugin store is dropped, until a
//! slot frees or [`SLOT_WAIT`] passes; then the call is refused as overloaded, with the
//! cause named, and the plugin is not blamed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The longest a plugin call waits for a free instance slot.
pub(crate) const SLOT_WAIT: Duration = Duration::from_secs(5);
/// A waiter looks again at least this often: a store's data is dropped (and waiters are
/// woken) just before the store's instance goes back to the pool.
const RECHECK: Duration = Duration::from_millis(5);

/// Counts the slots held and wakes callers waiting for a slot when a store is dropped.
#[derive(Debug, Default)]
pub(crate) struct SlotSignal {
    /// Stores that hold a slot now (a running call, or a warm instance kept for reuse).
    held: AtomicUsize,
    waiters: AtomicUsize,
    releases: Mutex<u64>,
    freed: Condvar,
}

impl SlotSignal {
    /// A store took a slot (its instance was made).
    pub(crate) fn taken(&self) {
        self.held.fetch_add(1, Ordering::AcqRel);
    }

    /// Stores that hold a slot now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// A store that took a slot was dropped: wake whoever waits. Costs two atomic operations
    /// when nobody does.
    pub(crate) fn released(&self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
        if self.waiters.load(Ordering::Acquire) > 0 {
            let mut releases = mcpproxy_support::lock(&self.releases);
            *releases = releases.wrapping_add(1);
            self.freed.notify_all();
        }
    }

    /// Waits for a release or [`RECHECK`], whichever is first; `false` once `deadline` has
    /// passed (the caller gives up).
    pub(crate) fn wait_until(&self, deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        self.waiters.fetch_add(1, Ordering::AcqRel);
        let releases = mcpproxy_support::lock(&self.releases);
        let timeout = (deadline - now).min(RECHECK);
        let _ = self
            .freed
            .wait_timeout(releases, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_sub(1, Ordering::AcqRel);
        true
    }
}

/// Whether instantiation failed because every slot of the pool is in use.
pub(crate) fn is_pool_exhausted(err: &wasmtime::Error) -> bool {
    err.chain()
        .any(|cause| cause.is::<wasmtime::PoolConcurrencyLimitError>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_release_wakes_a_waiter_and_the_deadline_ends_the_wait() {
        let signal = Arc::new(SlotSignal::default());
        assert!(!signal.wait_until(Instant::now()));
        let waiter = {
            let signal = signal.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut rounds = 0;
                while signal.wait_until(deadline) {
                    rounds += 1;
                    if *mcpproxy_support::lock(&signal.releases) > 0 {
                        return rounds;
                    }
                }
                panic!("the deadline passed without a release");
            })
        };
        signal.taken();
        assert_eq!(signal.held(), 1);
        while signal.waiters.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        signal.released();
        assert!(waiter.join().unwrap() >= 1);
        assert_eq!(signal.held(), 0);
    }
}
