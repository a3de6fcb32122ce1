//! What the proxy offers a plugin at run time: the `mcpproxy:plugin/host` imports (`log`,
//! `config`) and the per-store state behind them. No policy logic lives here.

use std::sync::Arc;

use super::bindings::{wit_host, wit_types};
use super::limits::MemoryLimiter;
use super::slots::SlotSignal;

/// Log lines one instance may write; a plugin cannot flood the proxy's log.
pub const MAX_LOG_LINES_PER_CALL: u32 = 32;
/// Longest log line kept, in bytes; the rest is cut.
pub const MAX_LOG_LINE_BYTES: usize = 4096;

/// The state of one plugin instance (one call, or a series of calls when it is reused).
pub struct PluginCtx {
    plugin: Arc<str>,
    settings: Arc<str>,
    pub(crate) limiter: MemoryLimiter,
    log_lines: u32,
    /// Told when this context's store is dropped, so calls waiting for a slot try again.
    pub(crate) slot_signal: Option<Arc<SlotSignal>>,
}

impl Drop for PluginCtx {
    fn drop(&mut self) {
        if let Some(signal) = &self.slot_signal {
            signal.released();
        }
    }
}

impl PluginCtx {
    pub fn new(plugin: Arc<str>, settings: Arc<str>, memory_cap: usize) -> Self {
        Self {
            plugin,
            settings,
            limiter: MemoryLimiter::new(memory_cap),
            log_lines: 0,
            slot_signal: None,
        }
    }

    /// Prepares a reused instance for its next call: that call's settings and a fresh log
    /// budget.
    pub(crate) fn begin_call(&mut self, settings: Arc<str>) {
        self.settings = settings;
        self.log_lines = 0;
    }
}

impl wit_types::Host for PluginCtx {}

impl wit_host::Host for PluginCtx {
    fn log(&mut self, level: wit_host::LogLevel, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES_PER_CALL {
            if self.log_lines == MAX_LOG_LINES_PER_CALL + 1 {
                tracing::warn!(plugin = %self.plugin, "plugin log limit reached; further lines of this call are dropped");
            }
            return;
        }
        let message = truncate(&message, MAX_LOG_LINE_BYTES);
        let plugin = &*self.plugin;
        match level {
            wit_host::LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            wit_host::LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            wit_host::LogLevel::Info => tracing::info!(plugin, "{message}"),
            wit_host::LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            wit_host::LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }

    fn config(&mut self) -> String {
        self.settings.to_string()
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
        for _ in 0..100 {
            ctx.log(wit_host::LogLevel::Debug, "x".repeat(10_000));
        }
        assert_eq!(ctx.log_lines, 100);
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
