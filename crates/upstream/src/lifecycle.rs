//! How a session with an HTTP upstream begins. `server/discover` first: a server of MCP
//! 2026-07-28 answers it, and from then on rmcp's client puts on every request what that
//! version asks of a client (the `MCP-Protocol-Version` header, `_meta` with the protocol
//! version, the client's capabilities and its name, the `Mcp-Method`/`Mcp-Name` headers and
//! the `Mcp-Param-*` headers a tool's `x-mcp-header` annotations ask for). A server of an
//! earlier version refuses the method and gets the `initialize` handshake instead, on the
//! same connection (rmcp's `Auto` lifecycle) or, when it refused at the HTTP level, on a
//! new one.

use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientInitializeError, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig,
};
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt};

use super::handler::UpstreamClient;

/// A session with the HTTP server `config` names: 2026-07-28 when it speaks it, else the
/// version `initialize` settles on.
pub(super) async fn serve_http<C: StreamableHttpClient + Sync>(
    handler: UpstreamClient,
    client: C,
    config: StreamableHttpClientTransportConfig,
) -> Result<RunningService<RoleClient, UpstreamClient>, ClientInitializeError> {
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config.clone());
    match handler
        .clone()
        .serve_with_lifecycle(transport, lifecycle)
        .await
    {
        Ok(session) => Ok(session),
        Err(discover) => {
            // Servers of earlier versions may refuse a request without a session with an
            // HTTP error rather than a JSON-RPC one.
            tracing::debug!(
                url = %mcpproxy_auth::masking::mask_url(&config.uri),
                "server/discover failed ({discover}); starting with initialize"
            );
            handler
                .serve(StreamableHttpClientTransport::with_client(client, config))
                .await
        }
    }
}
