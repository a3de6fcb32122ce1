//! mcpproxy's own `subscriptions/listen` stream on a server whose session began without
//! `initialize` (MCP 2026-07-28), for `notifications/tools/list_changed`.
//!
//! mcpproxy keeps a server's tool list until the server says it changed (or the periodic
//! sweep, `tools_refresh_secs`, reads it again): it does not list before each call, whatever
//! the list's `ttlMs` (the official Python SDK sends `ttlMs: 0`, "immediately stale", with
//! every list; a list before each call would double the requests a call costs). Keeping
//! the list is right only if mcpproxy hears of changes. A 2026-07-28 server may say so only
//! on the listen streams open to it (the Python SDK 2.3 publishes `ToolsListChanged` to its
//! subscribers and nowhere else), and mcpproxy opens one for a client stream only when the
//! server speaks the client's version: without a stream of its own it would keep a changed
//! list until the next sweep. So each such session gets one ([`watch_tool_list`]), opened
//! once the first listing is in, and open again (and the tools listed again, in case a
//! change came while it was closed) whenever the server or a load balancer ends it.
//!
//! A change heard there is handled as one announced on the session is
//! ([`super::handler`]): the tools listed again and vetted, then the change announced to the
//! sessions of the server's direct endpoint and to every client listen stream that sees it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient};
use tokio::time::Instant;

use super::Upstream;
use super::listing::Warned;
use super::supervisor::relist_after_change;

/// Whether the session of `peer` needs mcpproxy's own stream: it began without
/// `initialize` (its changes reach only listen streams) and the server says its tool list
/// changes.
fn wants_stream(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info().is_some_and(|info| {
        !info.protocol_version.has_initialize()
            && info
                .capabilities
                .tools
                .as_ref()
                .and_then(|tools| tools.list_changed)
                == Some(true)
    })
}

/// Keeps a `subscriptions/listen` stream for tool-list changes open on the session of
/// `peer` for as long as the session lasts, when it needs one ([`wants_stream`]);
/// otherwise does nothing. Called once the session's first listing is published.
pub(super) fn watch_tool_list(
    upstream: &Arc<Upstream>,
    peer: &Peer<RoleClient>,
    warned: Arc<Warned>,
) {
    if !wants_stream(peer) {
        return;
    }
    let watcher = Watcher {
        upstream: Arc::downgrade(upstream),
        server: upstream.name().to_owned(),
        peer: peer.clone(),
        warned,
        initial: upstream.settings.reconnect_initial,
        max: upstream
            .settings
            .reconnect_max
            .max(upstream.settings.reconnect_initial),
    };
    tokio::spawn(watcher.run());
}

/// The task behind [`watch_tool_list`].
struct Watcher {
    upstream: Weak<Upstream>,
    server: String,
    peer: Peer<RoleClient>,
    warned: Arc<Warned>,
    /// The wait before opening the stream again, doubled up to `max` while it keeps ending
    /// soon after it opened.
    initial: Duration,
    max: Duration,
}

impl Watcher {
    /// Opens the stream, follows it until it ends, and opens it again after a pause; ends
    /// when the server is gone, the session is over (its transport closed), or the server
    /// refuses the stream.
    async fn run(self) {
        let mut backoff = self.initial;
        let mut first = true;
        while !self.peer.is_transport_closed() {
            let opened = Instant::now();
            let filter = SubscriptionFilter::builder().tools_list_changed().build();
            let mut stream = match self.peer.listen(filter).await {
                Ok(stream) => stream,
                Err(rmcp::ServiceError::McpError(error)) => {
                    tracing::debug!(
                        server = %self.server,
                        "subscriptions/listen refused ({}); tool changes are seen at the periodic sweep",
                        error.message
                    );
                    return;
                }
                Err(e) => {
                    tracing::debug!(server = %self.server, "subscriptions/listen failed: {e}");
                    if !self.pause(&mut backoff, opened).await {
                        return;
                    }
                    continue;
                }
            };
            if stream.acknowledged().tools_list_changed != Some(true) {
                tracing::debug!(
                    server = %self.server,
                    "subscriptions/listen does not take tools/list_changed; tool changes are seen at the periodic sweep"
                );
                return;
            }
            // A change may have come while no stream was open.
            if !first && !self.changed(false).await {
                return;
            }
            first = false;
            loop {
                match stream.next().await {
                    Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                        if !self.changed(true).await {
                            return;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            tracing::debug!(
                server = %self.server,
                "the listen stream for tool changes ended ({:?}); opening it again",
                stream.end()
            );
            if !self.pause(&mut backoff, opened).await {
                return;
            }
        }
    }

    /// Waits before the stream is opened again: `backoff` (doubled for the next time, up to
    /// `max`) after a stream that ended within `max` of `opened`, the initial wait after one
    /// that lasted. Whether the server is still there.
    async fn pause(&self, backoff: &mut Duration, opened: Instant) -> bool {
        if opened.elapsed() > self.max {
            *backoff = self.initial;
        }
        tokio::time::sleep(*backoff).await;
        *backoff = (*backoff * 2).min(self.max);
        self.upstream.strong_count() > 0
    }

    /// Lists the tools again and, when the server `announced` a change or the list is not
    /// what it was, passes the change on to the sessions of its direct endpoint and to the
    /// client listen streams that see it. Whether the server is still there.
    async fn changed(&self, announced: bool) -> bool {
        let Some(upstream) = self.upstream.upgrade() else {
            return false;
        };
        let before = upstream.wire_tools();
        if announced {
            tracing::info!(
                server = %self.server,
                "received tools/list_changed from upstream server (on mcpproxy's listen stream)"
            );
        }
        relist_after_change(&upstream, &self.peer, &self.warned).await;
        if announced || !upstream.wire_tools().same_tools(&before) {
            let notification = ServerNotification::ToolListChangedNotification(Default::default());
            let back_channel = &upstream.back_channel;
            back_channel.relay_change(back_channel.direct_sessions(&self.server), &notification);
            back_channel.announce(&self.server, None, notification);
        }
        true
    }
}
