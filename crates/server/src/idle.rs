//! Memory given back when the proxy goes quiet.
//!
//! Start-up ends by giving the kernel back what it freed and taking start-up's code out of
//! the resident set (see `serve`). A proxy that then serves calls maps the code of the call
//! path back in and grows its heap; when the calls stop, it would keep both until it
//! exits. [`release_when_quiet`] watches the process's CPU time and, at the first quiet
//! window after a busy one, does the same release again: an idle proxy holds what an idle
//! proxy needs, whatever it served before.
//!
//! Quiet is measured, not guessed from requests: the process used at most
//! [`QUIET_TICKS`] of CPU time in a [`WINDOW`] (1% of one core), which the timers of an
//! idle proxy stay far under and any served load exceeds.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the proxy looks at whether it went quiet.
const WINDOW: Duration = Duration::from_secs(30);
/// CPU time (in the kernel's clock ticks, 1/100 s) in a [`WINDOW`] at or under which the
/// process is quiet: 0.3 s in 30 s.
const QUIET_TICKS: u64 = 30;

/// Gives memory back at each quiet window that follows a busy one, until `shutdown`.
/// Returns at once where the process's CPU time cannot be read (not Linux).
pub(crate) async fn release_when_quiet(shutdown: CancellationToken) {
    let Some(start) = cpu_ticks() else {
        return;
    };
    let mut watch = QuietWatch::new(start);
    let mut windows = tokio::time::interval_at(tokio::time::Instant::now() + WINDOW, WINDOW);
    windows.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = windows.tick() => {}
        }
        let Some(now) = cpu_ticks() else {
            return;
        };
        if watch.went_quiet(now) {
            // malloc_trim walks the heap under the allocator's lock: not on a worker.
            let released = tokio::task::spawn_blocking(give_back).await.unwrap_or(0);
            tracing::debug!(
                code_bytes = released,
                "quiet: gave back freed memory and the resident code pages"
            );
        }
    }
}

/// Gives the kernel back the heap's free pages and the executable's resident code pages
/// (see the module's doc); returns how many bytes of code were resident.
pub(crate) fn give_back() -> usize {
    mcpproxy_plugin_host::release_freed_memory();
    mcpproxy_plugin_host::release_code_pages()
}

/// Whether a window of CPU time is the first quiet one after busy ones.
#[derive(Debug)]
struct QuietWatch {
    /// The process's CPU ticks at the end of the last window.
    last: u64,
    /// Whether a window since the last release was busy.
    busy: bool,
}

impl QuietWatch {
    /// Start-up has just released: nothing to give back until a busy window.
    fn new(now: u64) -> Self {
        Self {
            last: now,
            busy: false,
        }
    }

    /// Takes the process's CPU ticks at the end of a window; true when that window was
    /// quiet and one before it (since the last release) was busy: the moment to release.
    fn went_quiet(&mut self, now: u64) -> bool {
        let used = now.saturating_sub(self.last);
        self.last = now;
        if used > QUIET_TICKS {
            self.busy = true;
            false
        } else {
            std::mem::take(&mut self.busy)
        }
    }
}

/// The process's CPU time so far (user and system, every thread), in clock ticks.
fn cpu_ticks() -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| ticks_of_stat(&stat))
}

/// `utime + stime` from the text of `/proc/PID/stat`. The command name (field 2) is in
/// parentheses and may hold spaces and parentheses: the fields are counted after its last
/// `)`, where field 3 (the state) is the first.
fn ticks_of_stat(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    // Fields 14 and 15 are utime and stime: the 12th and 13th after the name.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_comes_at_the_first_quiet_window_after_busy_ones() {
        let mut watch = QuietWatch::new(1_000);
        // Quiet since start-up (which released): nothing to do.
        assert!(!watch.went_quiet(1_010));
        assert!(!watch.went_quiet(1_010 + QUIET_TICKS));
        // Busy windows, then the first quiet one releases, and only that one.
        assert!(!watch.went_quiet(5_000));
        assert!(!watch.went_quiet(9_000));
        assert!(watch.went_quiet(9_001));
        assert!(!watch.went_quiet(9_002));
        // Busy again: released again when it goes quiet.
        assert!(!watch.went_quiet(9_002 + QUIET_TICKS + 1));
        assert!(watch.went_quiet(9_002 + QUIET_TICKS + 1));
    }

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (mcp (proxy) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 9 0 100 0 0";
        assert_eq!(ticks_of_stat(stat), Some(325));
        assert_eq!(ticks_of_stat("4242 (short) S 1"), None);
        assert_eq!(ticks_of_stat("no parentheses"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_cpu_time() {
        assert!(cpu_ticks().is_some());
    }
}
