//! Clients' `subscriptions/listen` streams (protocol 2026-07-28). Each stream registers here
//! with the server it sees (one, on a direct endpoint; else every server) and rmcp's sink
//! for it, which drops what the client did not ask for and tags the rest with the stream's
//! subscription id. A change an upstream announces reaches:
//!
//! - when it came on an upstream stream mcpproxy opened for one client stream (tagged with
//!   that upstream stream's id): that client stream only;
//! - untagged (a server of an earlier protocol announcing on its session, or a change
//!   mcpproxy noticed itself): every stream that sees the server.
//!
//! At most [`MAX_LISTENERS`] streams are open at once: each one may hold a stream open on
//! every upstream.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{RequestId, ServerNotification};
use rmcp::service::SubscriptionSink;

use super::{BackChannel, lock};

/// The most `subscriptions/listen` streams open at once, over all clients.
pub const MAX_LISTENERS: usize = 256;

#[derive(Default)]
pub(super) struct Listeners {
    next: u64,
    by_id: HashMap<u64, Listener>,
}

struct Listener {
    /// The server the stream sees; `None`: every server.
    server: Option<String>,
    sink: SubscriptionSink,
    /// The streams opened upstream for this one: (server, upstream request id).
    upstream: Vec<(String, RequestId)>,
}

impl Listener {
    fn sees(&self, server: &str) -> bool {
        self.server.as_deref().is_none_or(|s| s == server)
    }
}

/// A client stream's registration: dropped when the stream ends.
pub struct ListenerGuard {
    back_channel: Arc<BackChannel>,
    id: u64,
}

impl ListenerGuard {
    /// What `server` sends on its stream `upstream_request` goes to this client stream.
    pub fn route(&self, server: &str, upstream_request: RequestId) {
        if let Some(listener) = lock(&self.back_channel.listeners).by_id.get_mut(&self.id) {
            listener
                .upstream
                .push((server.to_owned(), upstream_request));
        }
    }
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        lock(&self.back_channel.listeners).by_id.remove(&self.id);
    }
}

impl BackChannel {
    /// Registers a client's stream that sees `server` (or every server), until the guard
    /// is dropped. Refused past [`MAX_LISTENERS`].
    pub fn add_listener(
        self: &Arc<Self>,
        server: Option<&str>,
        sink: SubscriptionSink,
    ) -> Result<ListenerGuard, String> {
        let mut listeners = lock(&self.listeners);
        if listeners.by_id.len() >= MAX_LISTENERS {
            return Err(format!(
                "mcpproxy already serves {MAX_LISTENERS} subscriptions/listen streams, the most \
                 it keeps open; close one first"
            ));
        }
        listeners.next += 1;
        let id = listeners.next;
        listeners.by_id.insert(
            id,
            Listener {
                server: server.map(str::to_owned),
                sink,
                upstream: Vec::new(),
            },
        );
        Ok(ListenerGuard {
            back_channel: self.clone(),
            id,
        })
    }

    /// The client streams a change `server` announced goes to: the one its upstream stream
    /// `tag` was opened for, or, untagged, every stream that sees `server`.
    pub fn listeners_of(&self, server: &str, tag: Option<&RequestId>) -> Vec<SubscriptionSink> {
        let listeners = lock(&self.listeners);
        let chosen = listeners.by_id.values().filter(|l| match tag {
            Some(tag) => l.upstream.iter().any(|(s, id)| s == server && id == tag),
            None => l.sees(server),
        });
        chosen.map(|l| l.sink.clone()).collect()
    }

    /// Sends `notification` to the client streams a change of `server` goes to (see
    /// [`BackChannel::listeners_of`]); a stream whose filter does not take it skips it.
    pub async fn announce(
        &self,
        server: &str,
        tag: Option<&RequestId>,
        notification: ServerNotification,
    ) {
        for sink in self.listeners_of(server, tag) {
            if let Err(e) = sink.send(notification.clone()).await {
                tracing::trace!(server, "not sent on a listen stream: {e}");
            }
        }
    }

    /// Open client streams.
    pub fn listener_count(&self) -> usize {
        lock(&self.listeners).by_id.len()
    }
}
