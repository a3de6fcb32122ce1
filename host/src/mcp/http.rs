//! The HTTP listener: MCP streamable HTTP at `/mcp`, with DNS-rebinding protection (only
//! loopback `Host` and `Origin` values unless configured otherwise) and a bounded body.

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::ProxyServer;
use crate::proxy::Proxy;

/// The largest MCP request body accepted.
pub const MAX_REQUEST_BODY_BYTES: usize = 4 << 20;

/// Who may talk to the listener.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Extra `Host` values besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin` values besides loopback origins.
    pub allowed_origins: Vec<String>,
}

/// The `/mcp` router.
pub fn router(proxy: Arc<Proxy>, access: &Access, shutdown: CancellationToken) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]", "::1"]
        .into_iter()
        .map(String::from)
        .collect();
    hosts.extend(access.allowed_hosts.iter().cloned());
    config.allowed_hosts = hosts;
    let mut origins: Vec<String> = [
        "http://localhost:*",
        "http://127.0.0.1:*",
        "http://[::1]:*",
        "https://localhost:*",
        "https://127.0.0.1:*",
        "https://[::1]:*",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    origins.extend(access.allowed_origins.iter().cloned());
    config.allowed_origins = origins;
    config.max_request_body_bytes = MAX_REQUEST_BODY_BYTES;
    config.cancellation_token = shutdown;
    let service = StreamableHttpService::new(
        move || Ok(ProxyServer::new(proxy.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new().nest_service("/mcp", service)
}
