//! The HTTP listener: MCP streamable HTTP at `/mcp`, with DNS-rebinding protection (only
//! loopback `Host` and `Origin` values unless configured otherwise) and a bounded body.

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::ProxyServer;
use crate::access::{Access, LOOPBACK_HOSTS, loopback_origin_patterns};
use crate::proxy::Proxy;

/// The largest MCP request body accepted.
pub const MAX_REQUEST_BODY_BYTES: usize = 4 << 20;

/// The `/mcp` router.
pub fn router(proxy: Arc<Proxy>, access: &Access, shutdown: CancellationToken) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    // rmcp checks too; the same lists, so both agree.
    config.allowed_hosts = LOOPBACK_HOSTS
        .into_iter()
        .chain(["::1"])
        .map(String::from)
        .chain(access.allowed_hosts.iter().cloned())
        .collect();
    config.allowed_origins = loopback_origin_patterns()
        .into_iter()
        .chain(access.allowed_origins.iter().cloned())
        .collect();
    config.max_request_body_bytes = MAX_REQUEST_BODY_BYTES;
    config.cancellation_token = shutdown;
    let service = StreamableHttpService::new(
        move || Ok(ProxyServer::new(proxy.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let access = Arc::new(access.clone());
    Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(move |request, next| {
            check_host_and_origin(access.clone(), request, next)
        }))
}

/// The loopback rule of [`crate::access`], applied before rmcp sees the request.
async fn check_host_and_origin(
    access: Arc<Access>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match access.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(message) => (http::StatusCode::FORBIDDEN, message).into_response(),
    }
}
