//! `subscriptions/listen` (protocol 2026-07-28) carried upstream: for one client stream,
//! a stream is opened on every server the client sees that speaks the client's version,
//! asking for what the client asked for there (on the aggregate endpoint, a server is
//! asked about its own resources only, and not about its tools, which clients of that
//! endpoint do not see). What those streams bring is routed back by the back channel.
//! Each stream opened upstream, or refused there, is a `subscription` record
//! (`details.method` `subscriptions/listen`, the filter sent in `arguments`).

use rmcp::model::SubscriptionFilter;

use mcpproxy_upstream::UpstreamStream;
use mcpproxy_upstream::back_channel::{CallOrigin, ListenerGuard};

use super::{CallContext, Proxy, Scope, SubscriptionMethod};

impl Proxy {
    /// Opens the upstream streams for a client stream registered as `guard`; they stay open
    /// while the returned streams live.
    pub async fn listen_upstreams(
        &self,
        scope: Scope<'_>,
        accepted: &SubscriptionFilter,
        origin: &CallOrigin,
        context: &CallContext,
        guard: &ListenerGuard,
    ) -> Vec<UpstreamStream> {
        let servers = match self.catalog_servers(scope) {
            Ok(servers) => servers,
            Err(e) => {
                tracing::debug!("no upstream streams for a listen stream: {e}");
                return Vec::new();
            }
        };
        let mut streams = Vec::new();
        for upstream in servers {
            let mut filter = accepted.clone();
            if scope == Scope::All {
                filter.tools_list_changed = None;
                filter.resource_subscriptions = self
                    .own_resources(upstream.name(), accepted.resource_subscriptions.as_deref())
                    .await;
            }
            let pending = self.subscription_draft(
                SubscriptionMethod::Listen,
                upstream.name(),
                SubscriptionMethod::Listen.as_str(),
                &serde_json::to_value(&filter).unwrap_or_default(),
                context,
            );
            match upstream.listen(filter, origin).await {
                Ok(Some(stream)) => {
                    guard.route(upstream.name(), stream.id().clone());
                    streams.push(stream);
                    self.subscription_done(pending, true, Ok(())).await;
                }
                // The server does not speak the client's version: it was not asked.
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(
                        server = upstream.name(),
                        "cannot open a listen stream upstream: {e}"
                    );
                    self.subscription_done(pending, true, Err(e.to_string()))
                        .await;
                }
            }
        }
        streams
    }

    /// Those of `uris` that `server` serves.
    async fn own_resources(&self, server: &str, uris: Option<&[String]>) -> Option<Vec<String>> {
        let mut own = Vec::new();
        for uri in uris? {
            if self
                .resource_server(Scope::All, uri)
                .await
                .is_ok_and(|owner| owner == server)
            {
                own.push(uri.clone());
            }
        }
        (!own.is_empty()).then_some(own)
    }
}
