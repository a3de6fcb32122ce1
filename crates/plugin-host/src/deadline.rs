//! Plugin deadlines: the thread that advances the engine's epoch when a running call's
//! deadline comes, and the guard a call holds while it runs.
//!
//! Epoch interruption is driven by deadlines, not by a clock. Arming a deadline gives the
//! store an epoch deadline of "the next epoch" and a callback that traps the store once its
//! own deadline (a point on the monotonic clock) has passed, and lets it go on otherwise.
//! The ticker thread sleeps until the earliest deadline of the calls still running and
//! only then advances the epoch: the overrunning call traps at its next epoch check (at
//! once in WebAssembly, on return from a host call), and every other running call's
//! callback finds its own deadline still ahead and goes on.
//!
//! So a deadline fires when it is due, to within the thread's wake-up latency, and a proxy
//! whose plugin calls finish in microseconds does not wake the thread between them: a call
//! that ends drops its guard, and the thread, woken at most once per deadline period for a
//! deadline that no longer runs, finds nothing to do.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use wasmtime::{Engine, Store, Trap, UpdateDeadline};

/// How long the idle thread sleeps before it looks whether its engine is gone.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The farthest a deadline is set: a timeout past this (say `u64::MAX` ms) means "none in
/// practice" and must not overflow the clock.
const FARTHEST: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The deadlines of running plugin calls, and the thread that enforces them.
pub(crate) struct DeadlineTicker {
    running: Mutex<Running>,
    thread: OnceLock<Thread>,
    /// Epochs advanced so far (each one: at least one deadline came while its call ran).
    advanced: AtomicU64,
}

#[derive(Default)]
struct Running {
    /// When each running call's deadline comes, with an id that tells equal instants apart.
    deadlines: BTreeSet<(Instant, u64)>,
    next_id: u64,
    /// When the thread looks next; `None` while it sleeps until a deadline is armed.
    wakes_at: Option<Instant>,
}

/// A running call's deadline: the ticker watches it until this is dropped (the call ended)
/// or the deadline came.
pub(crate) struct ArmedDeadline {
    ticker: Arc<DeadlineTicker>,
    key: (Instant, u64),
}

/// Store data that holds the deadline of the call running in its store, so that arming a
/// deadline ([`crate::PluginEngine`]'s `arm_deadline`) also keeps it watched.
pub(crate) trait HoldsDeadline {
    /// Holds the deadline of the call about to run, dropping the previous call's.
    fn hold_deadline(&mut self, armed: ArmedDeadline);
}

impl ArmedDeadline {
    /// When the deadline comes.
    pub(crate) fn at(&self) -> Instant {
        self.key.0
    }
}

impl Drop for ArmedDeadline {
    fn drop(&mut self) {
        self.ticker.running().deadlines.remove(&self.key);
    }
}

impl DeadlineTicker {
    /// Starts the thread for `engine`; it ends once the engine is dropped.
    pub(crate) fn start(engine: &Engine) -> Arc<Self> {
        let ticker = Arc::new(Self {
            running: Mutex::default(),
            thread: OnceLock::new(),
            advanced: AtomicU64::new(0),
        });
        let weak = engine.weak();
        let state = ticker.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpproxy-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    let wakes_at = state.advance_if_due(&engine);
                    drop(engine);
                    match wakes_at {
                        Some(at) => {
                            std::thread::park_timeout(at.saturating_duration_since(Instant::now()))
                        }
                        None => std::thread::park_timeout(IDLE_CHECK),
                    }
                }
            });
        match spawned {
            Ok(handle) => {
                let _ = ticker.thread.set(handle.thread().clone());
            }
            // Without the thread no deadline fires; say so loudly rather than run unbounded.
            Err(e) => tracing::error!(
                "cannot start the plugin deadline thread: {e}; plugin CPU limits are not enforced"
            ),
        }
        ticker
    }

    fn running(&self) -> MutexGuard<'_, Running> {
        mcpproxy_support::lock(&self.running)
    }

    /// Advances the epoch if a running call's deadline has come (forgetting those
    /// deadlines: their calls trap at their next epoch check, however late that is), and
    /// says when to look next.
    fn advance_if_due(&self, engine: &Engine) -> Option<Instant> {
        let mut running = self.running();
        let now = Instant::now();
        let mut due = false;
        while let Some(&(at, _)) = running.deadlines.first()
            && at <= now
        {
            running.deadlines.pop_first();
            due = true;
        }
        if due {
            engine.increment_epoch();
            self.advanced.fetch_add(1, Ordering::Relaxed);
        }
        running.wakes_at = running.deadlines.first().map(|&(at, _)| at);
        running.wakes_at
    }

    /// Starts a deadline of `timeout` for the call `store` is about to run, counted from
    /// now. Hold the guard while the call runs and drop it when the call returns.
    pub(crate) fn arm<T: 'static>(
        self: &Arc<Self>,
        store: &mut Store<T>,
        timeout: Duration,
    ) -> ArmedDeadline {
        let now = Instant::now();
        let at = now + timeout.min(FARTHEST);
        // The store's epoch deadline is set before the deadline is registered: whatever
        // epoch the ticker advances to for it is past the store's deadline.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= at {
                Err(Trap::Interrupt.into())
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        let mut running = self.running();
        let id = running.next_id;
        running.next_id = running.next_id.wrapping_add(1);
        running.deadlines.insert((at, id));
        let sooner = running.wakes_at.is_none_or(|wakes| at < wakes);
        if sooner {
            running.wakes_at = Some(at);
        }
        drop(running);
        if sooner && let Some(thread) = self.thread.get() {
            thread.unpark();
        }
        ArmedDeadline {
            ticker: self.clone(),
            key: (at, id),
        }
    }

    /// Epochs advanced so far.
    #[cfg(test)]
    fn advanced(&self) -> u64 {
        self.advanced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Config;

    fn engine() -> Engine {
        Engine::new(Config::new().epoch_interruption(true)).expect("engine")
    }

    /// Waits (up to 10 s, for a loaded machine) until `done`.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let give_up = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < give_up, "{what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_call_that_ends_in_time_never_advances_the_epoch() {
        let engine = engine();
        let ticker = DeadlineTicker::start(&engine);
        let mut store = Store::new(&engine, ());
        for _ in 0..1000 {
            drop(ticker.arm(&mut store, Duration::from_millis(20)));
        }
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(ticker.advanced(), 0);
        assert!(ticker.running().deadlines.is_empty());
    }

    #[test]
    fn a_deadline_that_comes_while_its_call_runs_advances_the_epoch_once() {
        let engine = engine();
        let ticker = DeadlineTicker::start(&engine);
        let mut store = Store::new(&engine, ());
        let started = Instant::now();
        let armed = ticker.arm(&mut store, Duration::from_millis(30));
        eventually("the deadline never fired", || ticker.advanced() == 1);
        assert!(
            started.elapsed() >= Duration::from_millis(30),
            "fired early"
        );
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(ticker.advanced(), 1, "once per deadline, not a clock");
        drop(armed);
        assert!(ticker.running().deadlines.is_empty());
    }

    #[test]
    fn a_sooner_deadline_wakes_the_thread_sleeping_for_a_later_one() {
        let engine = engine();
        let ticker = DeadlineTicker::start(&engine);
        let mut long = Store::new(&engine, ());
        let mut short = Store::new(&engine, ());
        let _long = ticker.arm(&mut long, Duration::from_secs(3600));
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        let _short = ticker.arm(&mut short, Duration::from_millis(20));
        eventually("the sooner deadline waited for the later one", || {
            ticker.advanced() == 1
        });
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert_eq!(
            ticker.running().deadlines.len(),
            1,
            "the hour-long one still runs"
        );
    }

    #[test]
    fn an_absurd_timeout_does_not_overflow_the_clock() {
        let engine = engine();
        let ticker = DeadlineTicker::start(&engine);
        let mut store = Store::new(&engine, ());
        let armed = ticker.arm(&mut store, Duration::MAX);
        assert!(armed.at() > Instant::now() + Duration::from_secs(3600));
    }
}
