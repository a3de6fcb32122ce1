//! Logging (`logging/setLevel`, `notifications/message`): each session keeps
//! the minimum level its client set (`info` until it sets one) and only
//! messages at or above it are sent.

// MCP logging is deprecated by SEP-2577 (protocol 2026-07-28) and rmcp marks its
// types so; the 2025-11-25 scenarios still exercise it.
#![allow(deprecated)]

use std::sync::Mutex;

use rmcp::{
    Peer, RoleServer,
    model::{LoggingLevel, LoggingMessageNotificationParam},
};
use serde_json::Value;

/// The logger name on every message.
const LOGGER: &str = "mcp-conformance-fixture";

/// The rank of a level, lowest (`debug`) first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// One session's minimum level.
#[derive(Debug)]
pub struct LogLevel(Mutex<LoggingLevel>);

impl Default for LogLevel {
    fn default() -> Self {
        Self(Mutex::new(LoggingLevel::Info))
    }
}

impl LogLevel {
    pub fn set(&self, level: LoggingLevel) {
        *mcpproxy_support::lock(&self.0) = level;
    }

    fn enabled(&self, level: LoggingLevel) -> bool {
        severity(level) >= severity(*mcpproxy_support::lock(&self.0))
    }

    /// Sends `data` at `level` to `peer` unless the session filters it out;
    /// whether it was sent (a closed peer counts as not sent).
    pub async fn log(&self, peer: &Peer<RoleServer>, level: LoggingLevel, data: Value) -> bool {
        if !self.enabled(level) {
            return false;
        }
        let message = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
        match peer.notify_logging_message(message).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "cannot send a log message");
                false
            }
        }
    }
}
