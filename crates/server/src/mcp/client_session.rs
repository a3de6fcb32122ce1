//! One client session's registration with the back channel: made when the session's handler is
//! made, dropped with it. Dropping it forgets the session's log level and subscriptions,
//! and unsubscribes upstream from resources no other session watches (each recorded as a
//! `subscription` from the proxy).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::service::{Peer, RoleServer};

use crate::proxy::Proxy;
use mcpproxy_upstream::back_channel::{BackChannel, SessionKey};

/// A client session, known to the back channel while it lives.
pub(super) struct SessionSlot {
    pub key: SessionKey,
    proxy: Arc<Proxy>,
    /// Whether the back channel knows the session (rmcp also makes handlers it uses for
    /// one look-up only; those never touch the back channel).
    opened: AtomicBool,
}

impl SessionSlot {
    pub(super) fn new(proxy: Arc<Proxy>) -> Arc<Self> {
        Arc::new(Self {
            key: SessionKey::new(),
            proxy,
            opened: AtomicBool::new(false),
        })
    }

    /// The back channel, with this session marked as known to it.
    pub(super) fn back_channel(&self) -> &Arc<BackChannel> {
        self.opened.store(true, Ordering::Relaxed);
        self.proxy.upstreams().back_channel()
    }

    /// Makes the session known (for `list_changed` notifications), as a session of the
    /// direct endpoint of `server` or, with `None`, of the aggregate one.
    pub(super) fn open(&self, peer: &Peer<RoleServer>, server: Option<&str>) {
        self.back_channel().open_session(self.key, peer, server);
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        if !self.opened.load(Ordering::Relaxed) {
            return;
        }
        let orphaned = self
            .proxy
            .upstreams()
            .back_channel()
            .close_session(self.key);
        if orphaned.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let proxy = self.proxy.clone();
        runtime.spawn(async move {
            for (server, uri) in orphaned {
                if let Err(e) = proxy.unsubscribe_orphaned(&server, &uri).await {
                    tracing::debug!("cannot unsubscribe from {uri} of '{server}': {e}");
                }
            }
        });
    }
}
