//! Append-only JSON-lines record of every `tools/call` the fixture receives.
//!
//! Each call opens the file in append mode, writes one complete line and
//! flushes, so another process (the test) can read it immediately and can
//! prove whether the upstream was reached at all.

use std::{fs::OpenOptions, io::Write, path::PathBuf, sync::Mutex};

use rmcp::model::JsonObject;
use serde::Serialize;

/// One log line; a struct so that `tool` is always written before `arguments`.
#[derive(Serialize)]
struct Entry<'a> {
    tool: &'a str,
    arguments: &'a JsonObject,
    /// The request's `_meta` without its progress token, when it had more.
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<&'a JsonObject>,
    /// A line of its own: the client cancelled this call (`notifications/cancelled`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    cancelled: bool,
}

/// Where to record tool calls; writes are serialized so lines never interleave.
#[derive(Debug)]
pub struct CallLog {
    path: PathBuf,
    lock: Mutex<()>,
}

impl CallLog {
    /// Record calls to `path`; the file is created on the first call.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            lock: Mutex::new(()),
        }
    }

    /// Append `{"tool": tool, "arguments": {...}}` (and `"meta"` when the request carried
    /// one) as one line and flush it.
    pub fn record(
        &self,
        tool: &str,
        arguments: &JsonObject,
        meta: Option<&JsonObject>,
    ) -> std::io::Result<()> {
        self.append(&Entry {
            tool,
            arguments,
            meta,
            cancelled: false,
        })
    }

    /// Append `{"tool": tool, "arguments": {...}, "cancelled": true}`: the call was
    /// cancelled while it ran.
    pub fn record_cancelled(&self, tool: &str, arguments: &JsonObject) -> std::io::Result<()> {
        self.append(&Entry {
            tool,
            arguments,
            meta: None,
            cancelled: true,
        })
    }

    fn append(&self, entry: &Entry<'_>) -> std::io::Result<()> {
        let mut line = serde_json::to_string(entry)?;
        line.push('\n');
        let _guard = mcpproxy_support::lock(&self.lock);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(line.as_bytes())?;
        file.flush()
    }
}
