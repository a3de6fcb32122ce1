//! `start` and `idle_stop_secs`: when mcpproxy starts a server. An `eager` server (the
//! default) is started with mcpproxy and kept running; a `lazy` one is started by the first
//! call that needs it and stopped again after `idle_stop_secs` without a call, its tools
//! known meanwhile from the list it last gave (the pins of the trust state). At the top
//! level, the default of every server; in a server, its own.

use std::time::Duration;

/// When a server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartMode {
    /// Started with mcpproxy, kept running.
    #[default]
    Eager,
    /// Started on its first call, stopped when idle.
    Lazy,
}

impl StartMode {
    /// The config's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            StartMode::Eager => "eager",
            StartMode::Lazy => "lazy",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "eager" => Some(StartMode::Eager),
            "lazy" => Some(StartMode::Lazy),
            _ => None,
        }
    }
}

/// How a server is started, and (lazy) how long it may sit unused before it is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub mode: StartMode,
    pub idle_stop: Duration,
}

/// How long a lazy server may go without a call before it is stopped, by default.
pub const DEFAULT_IDLE_STOP: Duration = Duration::from_secs(600);
/// The longest `idle_stop_secs` accepted: a week.
pub const MAX_IDLE_STOP_SECS: u64 = 7 * 24 * 3600;

impl Default for Start {
    fn default() -> Self {
        Self {
            mode: StartMode::Eager,
            idle_stop: DEFAULT_IDLE_STOP,
        }
    }
}

impl Start {
    pub fn is_lazy(&self) -> bool {
        self.mode == StartMode::Lazy
    }
}
