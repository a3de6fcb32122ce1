//! `scopes` on the MCP front end: the [`View`] of a request's caller (from the identity the
//! `/mcp` gate put in the request), and the listings a scoped caller reads less what is
//! hidden from them (the servers' statuses behind `retrieve_tools`' note; the aggregate
//! endpoint's prompts, resources and templates: every `list_*` of the catalog goes through
//! [`ProxyServer::listed`]).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::service::{RequestContext, RoleServer};

use super::ProxyServer;
use super::server::{catalog_error, identity};
use crate::proxy::{CatalogError, Proxy};
use crate::scoping::View;

/// The servers' statuses as a caller who sees `view` may read them: hidden servers and
/// tools left out, so no note names them.
pub(super) fn seen_statuses(
    proxy: &Proxy,
    view: Option<&View>,
) -> Vec<mcpproxy_upstream::ServerStatus> {
    let mut statuses = proxy.upstreams().statuses();
    if let Some(view) = view {
        statuses.retain(|s| view.sees_server(&s.name));
        for status in &mut statuses {
            let server = status.name.clone();
            status.pending.retain(|tool| view.sees_tool(&server, tool));
        }
    }
    statuses
}

/// The aggregate endpoint's prompts, resources or templates (named `server:name`) less
/// those of servers `view` hides. A direct endpoint's items carry no server: its whole
/// server is hidden or not, at the HTTP gate.
fn seen_items<T>(items: Vec<T>, view: Option<&View>, name: fn(&T) -> &String) -> Vec<T> {
    let Some(view) = view else {
        return items;
    };
    items
        .into_iter()
        .filter(|item| {
            name(item)
                .split_once(':')
                .is_some_and(|(server, _)| view.sees_server(server))
        })
        .collect()
}

impl ProxyServer {
    /// A listing of the upstreams' prompts, resources or templates as the caller of `context`
    /// reads it: a catalog failure as its JSON-RPC error, and on the aggregate endpoint the
    /// items of servers hidden from the caller left out.
    pub(super) async fn listed<T>(
        &self,
        listing: impl Future<Output = Result<Vec<T>, CatalogError>>,
        context: &RequestContext<RoleServer>,
        name: fn(&T) -> &String,
    ) -> Result<Vec<T>, ErrorData> {
        let items = listing.await.map_err(catalog_error)?;
        Ok(seen_items(
            items,
            self.aggregate_view(context).as_deref(),
            name,
        ))
    }

    /// [`ProxyServer::view`] on the aggregate endpoint; `None` on a direct one.
    pub(super) fn aggregate_view(&self, context: &RequestContext<RoleServer>) -> Option<Arc<View>> {
        self.fixed_server
            .is_none()
            .then(|| self.view(context))
            .flatten()
    }

    /// What the caller of `context` sees (`scopes`); `None`: everything.
    pub(super) fn view(&self, context: &RequestContext<RoleServer>) -> Option<Arc<View>> {
        let identity = identity(context)?;
        self.proxy.view_for(&identity.subject, &identity.groups)
    }
}
