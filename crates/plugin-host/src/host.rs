//! What the proxy offers a plugin at run time: the `mcpproxy:plugin/host` imports (`log`,
//! `config`, `caller`), the per-call log budget they share with the plugin's stdout and stderr, and
//! the per-store state behind them (its WASI, which grants nothing, is in `wasi`). No policy
//! logic lives here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use mcpproxy_policy::Caller;
use wasmtime_wasi::{WasiCtxView, WasiView};

use super::bindings::wit_host::{self, LogLevel};
use super::bindings::wit_types;
use super::deadline::{ArmedDeadline, HoldsDeadline};
use super::limits::MemoryLimiter;
use super::slots::SlotSignal;
use super::wasi::PluginWasi;

/// Log lines one instance may write per call (`host.log`, stdout and stderr together); a
/// plugin cannot flood the proxy's log.
pub(crate) const MAX_LOG_LINES_PER_CALL: u32 = 32;
/// Longest log line kept, in bytes; the rest is cut.
pub(crate) const MAX_LOG_LINE_BYTES: usize = 4096;

/// A plugin's way into the proxy's log, shared by `host.log` and its stdout and stderr: the
/// per-call line budget and the line-length cap live here, once.
#[derive(Debug)]
pub(crate) struct PluginLog {
    plugin: Arc<str>,
    lines: AtomicU32,
}

impl PluginLog {
    pub(crate) fn new(plugin: Arc<str>) -> Self {
        Self {
            plugin,
            lines: AtomicU32::new(0),
        }
    }

    /// A fresh budget, for the next call of a reused instance.
    pub(crate) fn begin_call(&self) {
        self.lines.store(0, Ordering::Relaxed);
    }

    /// Lines written (or attempted) in this call.
    pub(crate) fn lines(&self) -> u32 {
        self.lines.load(Ordering::Relaxed)
    }

    /// Whether the budget is spent: further lines would be dropped.
    pub(crate) fn exhausted(&self) -> bool {
        self.lines() >= MAX_LOG_LINES_PER_CALL
    }

    /// Writes one line, cut to [`MAX_LOG_LINE_BYTES`], unless the call's budget is spent
    /// (the first line past it says so, once).
    pub(crate) fn write(&self, level: LogLevel, message: &str) {
        let n = self.lines.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if n > MAX_LOG_LINES_PER_CALL {
            if n == MAX_LOG_LINES_PER_CALL + 1 {
                tracing::warn!(plugin = %self.plugin, "plugin log limit reached; further lines of this call are dropped");
            }
            return;
        }
        let message = truncate(message, MAX_LOG_LINE_BYTES);
        let plugin = &*self.plugin;
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

/// The state of one plugin instance (one call, or a series of calls when it is reused).
pub(crate) struct PluginCtx {
    settings: Arc<str>,
    pub(crate) limiter: MemoryLimiter,
    log: Arc<PluginLog>,
    /// WASI with nothing granted (see `wasi`); built on the guest's first WASI call.
    wasi: PluginWasi,
    /// Told when this context's store is dropped, so calls waiting for a slot try again.
    pub(crate) slot_signal: Option<Arc<SlotSignal>>,
    /// The deadline of the call running in this store, if one is.
    pub(crate) deadline: Option<ArmedDeadline>,
    /// Who asked for the call being judged (validators, result guards), when a logged-in
    /// client did: what `host.caller` answers.
    pub(crate) caller: Option<Arc<Caller>>,
}

impl Drop for PluginCtx {
    fn drop(&mut self) {
        if let Some(signal) = &self.slot_signal {
            signal.released();
        }
    }
}

impl PluginCtx {
    pub(crate) fn new(plugin: Arc<str>, settings: Arc<str>, memory_cap: usize) -> Self {
        Self {
            settings,
            limiter: MemoryLimiter::new(memory_cap),
            log: Arc::new(PluginLog::new(plugin)),
            wasi: PluginWasi::new(),
            slot_signal: None,
            deadline: None,
            caller: None,
        }
    }

    /// Prepares a reused instance for its next call: that call's settings and a fresh log
    /// budget.
    pub(crate) fn begin_call(&mut self, settings: Arc<str>) {
        self.settings = settings;
        self.log.begin_call();
    }

    /// The call running in this store has returned: its deadline is no longer watched
    /// (a store kept for a later call must not keep the deadline thread waking for it).
    pub(crate) fn end_call(&mut self) {
        self.deadline = None;
        self.caller = None;
    }
}

impl HoldsDeadline for PluginCtx {
    fn hold_deadline(&mut self, armed: ArmedDeadline) {
        self.deadline = Some(armed);
    }
}

impl WasiView for PluginCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi.view(&self.log)
    }
}

impl wit_types::Host for PluginCtx {}

impl wit_host::Host for PluginCtx {
    fn log(&mut self, level: LogLevel, message: String) {
        self.log.write(level, &message);
    }

    fn config(&mut self) -> String {
        self.settings.to_string()
    }

    fn caller(&mut self) -> Option<wit_host::CallerIdentity> {
        self.caller
            .as_deref()
            .map(|caller| wit_host::CallerIdentity {
                subject: caller.subject.clone(),
                groups: caller.groups.clone(),
            })
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// What a call logs, captured for the tests (shared with `tests/wasi_sandbox.rs`).
#[cfg(test)]
#[path = "../tests/support/logged.rs"]
mod logged;

#[cfg(test)]
mod tests {
    use super::*;
    use wit_host::Host;

    #[test]
    fn config_returns_the_plugin_settings() {
        let mut ctx = PluginCtx::new("p".into(), r#"{"a":1}"#.into(), 1 << 20);
        assert_eq!(ctx.config(), r#"{"a":1}"#);
    }

    #[test]
    fn log_lines_are_bounded_per_call() {
        let mut ctx = PluginCtx::new("p".into(), "{}".into(), 1 << 20);
        let ((), logged) = logged::capture(|| {
            for _ in 0..100 {
                ctx.log(LogLevel::Debug, "x".repeat(10_000));
            }
        });
        assert_eq!(ctx.log.lines(), 100);
        // What reached the log: the first lines up to the budget, each cut to the longest
        // kept, and one notice that the rest of the call's lines are dropped.
        let from_plugin: Vec<&String> = logged.iter().filter(|l| l.starts_with('x')).collect();
        assert_eq!(
            from_plugin.len(),
            MAX_LOG_LINES_PER_CALL as usize,
            "lines of one call that reached the log"
        );
        assert!(
            from_plugin.iter().all(|l| l.len() == MAX_LOG_LINE_BYTES),
            "a line longer than {MAX_LOG_LINE_BYTES} bytes reached the log"
        );
        let notices = logged
            .iter()
            .filter(|l| l.starts_with("plugin log limit reached"))
            .count();
        assert_eq!(notices, 1, "notices that the call's log budget is spent");

        // The next call of a reused instance has a budget again.
        let ((), logged) = logged::capture(|| {
            ctx.begin_call("{}".into());
            ctx.log(LogLevel::Info, "next call".into());
        });
        assert_eq!(logged, ["next call"]);
    }

    #[test]
    fn caller_answers_the_identity_of_the_call_and_forgets_it_after() {
        let mut ctx = PluginCtx::new("p".into(), "{}".into(), 1 << 20);
        assert!(ctx.caller().is_none());
        ctx.caller = Some(Arc::new(Caller {
            subject: "alice".into(),
            groups: vec!["sre".into()],
        }));
        let seen = ctx.caller().expect("the call's caller");
        assert_eq!(
            (seen.subject.as_str(), seen.groups.as_slice()),
            ("alice", &["sre".to_owned()][..])
        );
        ctx.end_call();
        assert!(
            ctx.caller().is_none(),
            "a warm instance keeps no caller between calls"
        );
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
