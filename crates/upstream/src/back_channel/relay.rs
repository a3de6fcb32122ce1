//! Relaying to clients: progress of a call (counted, so a call's answer can wait for the
//! progress sent ahead of it: [`CallGuard::settle`]), log messages and change
//! notifications, queued per session; and the `_meta` a client request passes on upstream.

// Logging and sampling are deprecated by SEP-2577 (2026-07-28), but the clients and servers
// of earlier versions use them, and mcpproxy carries them.
#![allow(
    deprecated,
    reason = "MCP logging and sampling are deprecated by SEP-2577; earlier clients and servers use them"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, LoggingMessageNotificationParam, ProgressNotificationParam,
    RequestMetaObject, ServerNotification,
};
use tokio::sync::Notify;

use super::calls::{CallGuard, CallOrigin};
use super::channel::BackChannel;
use super::outbox::{Item, QueueKey, Target};
use super::sessions::{LogRecipient, Recipient};

/// The most `_meta` bytes (as JSON) a client request may pass on to an upstream; a larger
/// `_meta` is not forwarded.
pub(super) const MAX_FORWARDED_META_BYTES: usize = 16 << 10;

/// How many progress notifications of one call were relayed, and how many are being
/// relayed now: rmcp hands each notification to a task of its own, so the last one can
/// still be on its way when the call's response arrives.
#[derive(Default)]
pub(super) struct Relays {
    pub(super) started: AtomicUsize,
    pub(super) active: AtomicUsize,
    /// Told when a relay ends.
    ended: Notify,
}

/// Held while one progress notification is relayed.
pub struct RelayTicket(pub(super) Arc<Relays>);

impl Drop for RelayTicket {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.ended.notify_waiters();
    }
}

impl CallGuard {
    /// Before the call's answer goes back: lets progress notifications the upstream sent
    /// before its answer reach the client first. Free for a call that had no progress; for
    /// one that had, a few scheduler turns and at most [`SETTLE_LIMIT`].
    pub async fn settle(&self) {
        if self.relays.started.load(Ordering::Acquire) == 0 {
            return;
        }
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        self.wait_for_relays(|_started, active| active == 0).await;
    }

    /// [`CallGuard::settle`] for a call whose transport counted the progress notifications
    /// the server sent ahead of its answer (`sent_before`): waits until that many have been
    /// taken up and every relay has ended, at most [`SETTLE_LIMIT`]. Free when there were
    /// none.
    pub async fn settle_counted(&self, sent_before: usize) {
        if sent_before == 0 {
            return;
        }
        // A notification rmcp could not read is never relayed: the wait ends at the limit.
        self.wait_for_relays(|started, active| started >= sent_before && active == 0)
            .await;
    }

    /// Waits until `done(started, active)` holds for the call's relays, looking again each
    /// time a relay ends, at most [`SETTLE_LIMIT`].
    async fn wait_for_relays(&self, done: impl Fn(usize, usize) -> bool) {
        let relays = &self.relays;
        let settled = async {
            loop {
                let ended = relays.ended.notified();
                tokio::pin!(ended);
                // Told of every relay that ends from here on, before looking.
                ended.as_mut().enable();
                let started = relays.started.load(Ordering::Acquire);
                if done(started, relays.active.load(Ordering::Acquire)) {
                    return;
                }
                ended.await;
            }
        };
        let _ = tokio::time::timeout(SETTLE_LIMIT, settled).await;
    }
}

/// The longest a call's answer waits for its progress notifications to be relayed.
pub(super) const SETTLE_LIMIT: Duration = Duration::from_millis(50);

impl BackChannel {
    /// Queues progress of the call `origin` (already carrying the client's progress token)
    /// for its session: past [`MAX_WAITING_PROGRESS`] of its token waiting, it replaces the
    /// newest of them. `ticket` is let go once it is sent, replaced or dropped.
    pub fn relay_progress(
        &self,
        origin: &CallOrigin,
        progress: ProgressNotificationParam,
        ticket: RelayTicket,
    ) {
        self.outboxes.push(
            QueueKey::Session(origin.session),
            || Target::Session(origin.peer.clone()),
            Item::Progress(progress, ticket),
        );
    }

    /// Queues a log message of `server` for each of `receivers` (see
    /// [`BackChannel::log_receivers`]); past [`MAX_QUEUED_LOGS`] waiting for a session it is
    /// dropped, and counted in one note.
    pub fn relay_log(
        &self,
        server: &str,
        receivers: Vec<LogRecipient>,
        message: LoggingMessageNotificationParam,
    ) {
        for LogRecipient {
            recipient,
            min_level,
        } in receivers
        {
            self.outboxes.push(
                QueueKey::Session(recipient.key),
                || Target::Session(recipient.peer.clone()),
                Item::Log {
                    server: server.to_owned(),
                    message: message.clone(),
                    min_level,
                },
            );
        }
    }

    /// Queues a change notification (`list_changed`, `resources/updated`) for each of
    /// `recipients`; one of each kind waits per session.
    pub fn relay_change(&self, recipients: Vec<Recipient>, notification: &ServerNotification) {
        for recipient in recipients {
            self.outboxes.push(
                QueueKey::Session(recipient.key),
                || Target::Session(recipient.peer.clone()),
                Item::Change(notification.clone()),
            );
        }
    }
}

/// The part of a client request's `_meta` that is the client's to pass on: everything but
/// the progress token (the upstream gets one of the proxy's, mapped back by the back channel) and
/// the `io.modelcontextprotocol/` keys of the client's own session. `None` when nothing
/// is left, or when it is larger than [`MAX_FORWARDED_META_BYTES`].
pub fn forwardable_meta(meta: &RequestMetaObject) -> Option<RequestMetaObject> {
    let kept: serde_json::Map<String, serde_json::Value> = meta
        .0
        .iter()
        .filter(|(key, _)| {
            key.as_str() != "progressToken" && !key.starts_with("io.modelcontextprotocol/")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if kept.is_empty() {
        return None;
    }
    let size = serde_json::to_vec(&kept).map_or(usize::MAX, |b| b.len());
    if size > MAX_FORWARDED_META_BYTES {
        tracing::debug!(size, "a request _meta too large to forward was dropped");
        return None;
    }
    Some(RequestMetaObject(kept.into()))
}

/// The per-request lifecycle `_meta` of a client on protocol 2026-07-28 or later (version,
/// capabilities, client info, log level); `None` for a client of an earlier version.
pub fn protocol_meta(
    version: Option<rmcp::model::ProtocolVersion>,
    capabilities: Option<ClientCapabilities>,
    client: Option<rmcp::model::Implementation>,
    request: &RequestMetaObject,
) -> Option<(rmcp::model::ProtocolVersion, RequestMetaObject)> {
    let version = version?;
    if version.as_str() < rmcp::model::ProtocolVersion::V_2026_07_28.as_str() {
        return None;
    }
    let mut meta = RequestMetaObject::default();
    meta.set_protocol_version(version.clone());
    meta.set_client_capabilities(capabilities.unwrap_or_default());
    if let Some(client) = client {
        meta.set_client_info(client);
    }
    if let Some(level) = request.log_level() {
        meta.set_log_level(level);
    }
    Some((version, meta))
}

#[cfg(test)]
mod tests;
