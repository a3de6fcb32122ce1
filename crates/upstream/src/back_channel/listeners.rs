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
//! What a stream is told is queued for it (see `outbox`): one change of each kind waits,
//! however often an upstream announces it. At most [`MAX_LISTENERS`] streams are open at
//! once: each one may hold a stream open on every upstream.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{RequestId, ServerNotification};
use rmcp::service::SubscriptionSink;

use super::channel::{BackChannel, lock};
use super::outbox::{Item, QueueKey, Target};

/// The most `subscriptions/listen` streams open at once, over all clients.
pub(super) const MAX_LISTENERS: usize = 256;

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
        self.back_channel.outboxes.forget(QueueKey::Stream(self.id));
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

    /// The client streams a change `server` announced goes to (by registration id): the one
    /// its upstream stream `tag` was opened for, or, untagged, every stream that sees
    /// `server`.
    pub fn listeners_of(
        &self,
        server: &str,
        tag: Option<&RequestId>,
    ) -> Vec<(u64, SubscriptionSink)> {
        let listeners = lock(&self.listeners);
        let chosen = listeners.by_id.iter().filter(|(_, l)| match tag {
            Some(tag) => l.upstream.iter().any(|(s, id)| s == server && id == tag),
            None => l.sees(server),
        });
        chosen.map(|(id, l)| (*id, l.sink.clone())).collect()
    }

    /// Queues `notification` for the client streams a change of `server` goes to (see
    /// [`BackChannel::listeners_of`]); a stream whose filter does not take it skips it.
    pub fn announce(
        &self,
        server: &str,
        tag: Option<&RequestId>,
        notification: ServerNotification,
    ) {
        for (id, sink) in self.listeners_of(server, tag) {
            self.outboxes.push(
                QueueKey::Stream(id),
                || Target::Stream(sink),
                Item::Change(notification.clone()),
            );
        }
    }

    /// Open client streams.
    #[cfg(test)]
    pub fn listener_count(&self) -> usize {
        lock(&self.listeners).by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rmcp::model::{ProtocolVersion, SubscriptionFilter};
    use rmcp::service::{RoleClient, RunningService, SubscriptionContext};
    use rmcp::{ClientLifecycleMode, ErrorData, ServerHandler, ServiceExt};
    use tokio::sync::mpsc;

    use super::*;

    /// A server that hands each listen stream's sink to the test and holds the stream open
    /// until the client ends it.
    struct Sinks(mpsc::UnboundedSender<SubscriptionSink>);

    impl ServerHandler for Sinks {
        fn get_info(&self) -> rmcp::model::ServerConfig {
            let capabilities = rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_prompts_list_changed()
                .build();
            rmcp::model::ServerConfig::new(capabilities)
        }

        fn accepted_subscription_filter(
            &self,
            requested: &SubscriptionFilter,
        ) -> Option<SubscriptionFilter> {
            Some(requested.clone())
        }

        async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
            let _ = self.0.send(context.sink().clone());
            context.cancelled().await;
            Ok(())
        }
    }

    /// A 2026-07-28 client session (server/discover, per-request `_meta`) to a [`Sinks`]
    /// server over an in-memory pipe, and the server's sinks as streams open.
    async fn session() -> (
        RunningService<RoleClient, ()>,
        mpsc::UnboundedReceiver<SubscriptionSink>,
    ) {
        let (server_io, client_io) = tokio::io::duplex(64 << 10);
        #[allow(
            clippy::disallowed_methods,
            reason = "a test: one sink per stream it opens"
        )]
        let (sinks, opened) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            if let Ok(server) = Sinks(sinks).serve(server_io).await {
                let _ = server.waiting().await;
            }
        });
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = rmcp::serve_client_with_lifecycle((), client_io, lifecycle)
            .await
            .expect("client session");
        (client, opened)
    }

    fn tools_changed() -> ServerNotification {
        ServerNotification::ToolListChangedNotification(Default::default())
    }

    #[tokio::test]
    async fn changes_reach_the_streams_that_see_the_server_or_the_one_tagged() {
        let (client, mut opened) = session().await;
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut direct = client.listen(filter.clone()).await.expect("listen");
        let mut aggregate = client.listen(filter).await.expect("listen");
        let channel = BackChannel::new();
        let direct_guard = channel
            .add_listener(Some("fx"), opened.recv().await.expect("sink"))
            .expect("registered");
        let _aggregate_guard = channel
            .add_listener(None, opened.recv().await.expect("sink"))
            .expect("registered");

        // Untagged, from fx: both streams see fx.
        channel.announce("fx", None, tools_changed());
        for stream in [&mut direct, &mut aggregate] {
            let got = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
            assert!(
                matches!(
                    got,
                    Ok(Ok(Some(ServerNotification::ToolListChangedNotification(_))))
                ),
                "{got:?}"
            );
        }
        // Untagged, from another server: only the stream that sees every server.
        assert_eq!(channel.listeners_of("other", None).len(), 1);
        // Tagged with an upstream stream opened for the direct one: only that one.
        let upstream_request = RequestId::Number(7);
        direct_guard.route("fx", upstream_request.clone());
        assert_eq!(channel.listeners_of("fx", Some(&upstream_request)).len(), 1);
        assert!(
            channel
                .listeners_of("fx", Some(&RequestId::Number(8)))
                .is_empty(),
            "an unknown tag reaches nobody"
        );
        drop(direct_guard);
        assert!(
            channel
                .listeners_of("fx", Some(&upstream_request))
                .is_empty(),
            "a closed stream's routes go with it"
        );
        assert_eq!(channel.listener_count(), 1);
    }

    #[tokio::test]
    async fn no_more_than_the_bound_of_streams_is_kept() {
        let (client, mut opened) = session().await;
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let _stream = client.listen(filter).await.expect("listen");
        let sink = opened.recv().await.expect("sink");
        let channel = BackChannel::new();
        let guards: Vec<ListenerGuard> = (0..MAX_LISTENERS)
            .map(|_| {
                channel
                    .add_listener(None, sink.clone())
                    .expect("under the bound")
            })
            .collect();
        let refused = channel
            .add_listener(None, sink.clone())
            .err()
            .expect("past the bound");
        assert!(refused.contains("256"), "{refused}");
        drop(guards);
        assert!(
            channel.add_listener(None, sink).is_ok(),
            "room again once closed"
        );
    }
}
