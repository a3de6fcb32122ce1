//! Whether the journal writes: `ok`, or `failing` with the reason (the OS's description of
//! the error, such as `No space left on device`) and since when. The writer thread sets it;
//! producers check it before they queue a record that somebody waits for (a call is refused
//! at once while the journal fails), and `/readyz`, `/metrics`, `/api/v1/status` and the
//! page show it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::record::format_timestamp;
use crate::record::now_ms;

/// The journal's health as shown to operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalHealth {
    /// `ok` or `failing`.
    pub state: &'static str,
    /// Why it fails: the error's text, such as `No space left on device`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it started failing (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

impl JournalHealth {
    /// Whether the journal writes.
    pub fn is_ok(&self) -> bool {
        self.reason.is_none()
    }
}

/// The shared state behind [`JournalHealth`]: a flag producers read without a lock, and the
/// reason and start time behind a mutex.
#[derive(Debug, Default)]
pub(super) struct Health {
    failing: AtomicBool,
    detail: Mutex<Option<(String, u64)>>,
}

impl Health {
    /// Whether writes fail now.
    pub(super) fn is_failing(&self) -> bool {
        self.failing.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(String, u64)>> {
        mcpproxy_support::lock(&self.detail)
    }

    /// Why writes fail, while they do.
    pub(super) fn reason(&self) -> Option<String> {
        self.lock().as_ref().map(|(reason, _)| reason.clone())
    }

    /// Writes fail for `reason` (keeps the time of the first failure of an episode).
    pub(super) fn fail(&self, reason: &str) {
        let mut detail = self.lock();
        let since = detail.as_ref().map_or_else(now_ms, |(_, since)| *since);
        *detail = Some((reason.to_owned(), since));
        self.failing.store(true, Ordering::SeqCst);
    }

    /// Writes work again.
    pub(super) fn recover(&self) {
        let mut detail = self.lock();
        *detail = None;
        self.failing.store(false, Ordering::SeqCst);
    }

    /// The state as operators see it.
    pub(super) fn show(&self) -> JournalHealth {
        match self.lock().as_ref() {
            None => JournalHealth {
                state: "ok",
                reason: None,
                since: None,
            },
            Some((reason, since)) => JournalHealth {
                state: "failing",
                reason: Some(reason.clone()),
                since: Some(format_timestamp(*since)),
            },
        }
    }
}
