//! MCP over streamable HTTP at `/mcp` (every upstream) and `/mcp/servers/NAME` (one
//! upstream as it is): rmcp's service behind one gate that, in order,
//! refuses a foreign `Host`/`Origin` (DNS-rebinding protection, [`mcpproxy_auth::access`]), checks
//! the bearer token when one is configured (the static `http.auth_token`, or with `auth` an
//! access token of the issuer, [`mcpproxy_auth::client_auth`]: its identity rides on the request's
//! extensions to every record), refuses a new session past the session bounds
//! ([`super::sessions`]), and reads the body within [`MAX_REQUEST_BODY_BYTES`]. A body that
//! is not JSON gets a JSON-RPC `-32700` parse error, and JSON that is not a JSON-RPC message
//! a `-32600`, instead of rmcp's bare `415`. A request whose answer is its reply alone gets
//! it as a JSON body where the client accepts one ([`super::json_reply`]).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::ProxyServer;
use super::json_reply;
use super::sessions::{BoundedSessions, SessionBounds, with_client};
use mcpproxy_auth::access::{Access, LOOPBACK_HOSTS, check_bearer, loopback_origin_patterns};
use mcpproxy_auth::client_auth::Verifier;

/// The largest MCP request body accepted.
pub const MAX_REQUEST_BODY_BYTES: usize = 4 << 20;

/// Who may use `/mcp`, and how many sessions it keeps.
#[derive(Clone)]
pub struct Endpoint {
    /// The Host/Origin rule.
    pub access: Access,
    /// The bearer token every request must carry, if any.
    pub auth_token: Option<String>,
    pub sessions: SessionBounds,
    /// Clients log in with access tokens of this issuer (`auth`).
    pub auth: Option<Arc<Verifier>>,
}

/// What the gate needs for each request.
struct Gate {
    access: Access,
    auth_token: Option<String>,
    sessions: Arc<BoundedSessions>,
    auth: Option<Arc<Verifier>>,
}

/// The `/mcp` router.
pub fn router(server: ProxyServer, endpoint: Endpoint, shutdown: CancellationToken) -> Router {
    let mut config = StreamableHttpServerConfig::default();
    // rmcp checks too; the same lists, so both agree.
    config.allowed_hosts = LOOPBACK_HOSTS
        .into_iter()
        .chain(["::1"])
        .map(String::from)
        .chain(endpoint.access.allowed_hosts.iter().cloned())
        .collect();
    config.allowed_origins = loopback_origin_patterns()
        .into_iter()
        .chain(endpoint.access.allowed_origins.iter().cloned())
        .collect();
    config.max_request_body_bytes = MAX_REQUEST_BODY_BYTES;
    // A plain JSON body for a request whose answer is one message (most tool calls), where
    // the client accepts it: no event-stream framing to write and parse. A handler that
    // sends a notification first (progress, logs) still answers as an event stream. rmcp
    // does this for stateless (2026-07-28) requests only; `json_reply` does it for sessions.
    config.json_response = true;
    config.cancellation_token = shutdown;
    let sessions = Arc::new(BoundedSessions::new(endpoint.sessions));
    let open = sessions.clone();
    server
        .proxy
        .metrics()
        .probe_sessions("http", Box::new(move || open.open()));
    let direct = Arc::new(DirectServices {
        server: server.clone(),
        config: config.clone(),
        sessions: sessions.clone(),
        services: Mutex::new(HashMap::new()),
    });
    // One handler per session.
    let service = StreamableHttpService::new(
        move || Ok(server.for_new_session()),
        sessions.clone(),
        config,
    );
    let gate = Arc::new(Gate {
        access: endpoint.access.clone(),
        auth_token: endpoint.auth_token,
        sessions,
        auth: endpoint.auth.clone(),
    });
    let metadata = super::client_login::metadata_router(endpoint.access, endpoint.auth);
    Router::new()
        .route_service("/mcp", service)
        .route(
            "/mcp/servers/{name}",
            axum::routing::any(move |Path(name): Path<String>, request: Request| {
                let direct = direct.clone();
                async move { direct.serve(name, request).await }
            }),
        )
        .layer(axum::middleware::from_fn(move |request, next| {
            guard(gate.clone(), request, next)
        }))
        .merge(metadata)
}

type Service = StreamableHttpService<ProxyServer, BoundedSessions>;

/// The direct endpoints: one rmcp service per upstream, made on first use, whose sessions
/// see that upstream only (so rmcp's own checks, such as the `Mcp-Param-*` headers of a
/// tool's `x-mcp-header` parameters, see that server's tools). They share `/mcp`'s session
/// bounds.
struct DirectServices {
    server: ProxyServer,
    config: StreamableHttpServerConfig,
    sessions: Arc<BoundedSessions>,
    services: Mutex<HashMap<String, Service>>,
}

impl DirectServices {
    async fn serve(&self, name: String, request: Request) -> Response {
        // A server `scopes` hide from the caller answers as one that is not configured.
        let view = request
            .extensions()
            .get::<mcpproxy_auth::client_auth::Identity>()
            .and_then(|identity| {
                self.server
                    .proxy
                    .view_for(&identity.subject, &identity.groups)
            });
        let seen = |server: &str| view.as_ref().is_none_or(|v| v.sees_server(server));
        if self.server.proxy.upstreams().get(&name).is_none() || !seen(&name) {
            let mut known = self.server.proxy.upstreams().names();
            known.retain(|server| seen(server));
            let known = known.join(", ");
            return jsonrpc_error(
                StatusCode::NOT_FOUND,
                None,
                -32602,
                &format!(
                    "there is no upstream server '{}' behind /mcp/servers/; configured servers: {known}",
                    mcpproxy_support::quote(&name)
                ),
            );
        }
        let service = {
            let mut services = mcpproxy_support::lock(&self.services);
            services
                .entry(name.clone())
                .or_insert_with(|| {
                    let server = self.server.clone();
                    StreamableHttpService::new(
                        move || Ok(server.for_new_session().for_server(name.clone())),
                        self.sessions.clone(),
                        self.config.clone(),
                    )
                })
                .clone()
        };
        match service.oneshot(request).await {
            Ok(response) => response.map(Body::new),
            Err(never) => match never {},
        }
    }
}

/// The address requests without one (a router used without the listener) count against.
const UNKNOWN_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

async fn guard(gate: Arc<Gate>, mut request: Request, next: Next) -> Response {
    if let Err(message) = gate.access.check(request.headers()) {
        return (StatusCode::FORBIDDEN, message).into_response();
    }
    if let Some(verifier) = &gate.auth {
        match super::client_login::authenticate(
            verifier,
            gate.auth_token.as_deref(),
            request.headers(),
        )
        .await
        {
            Ok(identity) => {
                if let Some(identity) = identity {
                    request.extensions_mut().insert(identity);
                }
            }
            Err(response) => return response,
        }
    } else if let Some(token) = &gate.auth_token
        && let Err(message) = check_bearer(token, request.headers())
    {
        let mut response = (StatusCode::UNAUTHORIZED, message).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"mcpproxy\""),
        );
        return response;
    }
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(UNKNOWN_CLIENT, |info| info.0.ip());
    if request.method() == Method::DELETE {
        // rmcp answers a session's DELETE with 202; the official SDKs expect 200 or 204
        // (and print `Session termination failed: 202` otherwise).
        let mut response = with_client(client, next.run(request)).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = Body::empty();
        }
        return response;
    }
    if request.method() != Method::POST {
        return with_client(client, next.run(request)).await;
    }
    if !request.headers().contains_key("mcp-session-id")
        && let Err(message) = gate.sessions.admit(client)
    {
        return jsonrpc_error(StatusCode::SERVICE_UNAVAILABLE, None, -32000, &message);
    }
    let json_body = json_reply::has_content_type(request.headers(), "application/json");
    let accepts_json = accepts_json(request.headers());
    let (mut parts, body) = request.into_parts();
    let retry_after = super::rate_limited::RetryAfter::default();
    parts.extensions.insert(retry_after.clone());
    let body = match http_body_util::Limited::new(body, MAX_REQUEST_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return jsonrpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                -32600,
                &format!(
                    "the request body is larger than {} MiB, the most /mcp accepts",
                    MAX_REQUEST_BODY_BYTES >> 20
                ),
            );
        }
        Err(e) => {
            return jsonrpc_error(
                StatusCode::BAD_REQUEST,
                None,
                -32700,
                &format!("cannot read the request body: {e}"),
            );
        }
    };
    let request = Request::from_parts(parts, Body::from(body.clone()));
    let response = with_client(client, next.run(request)).await;
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE && json_body {
        // rmcp answers 415 for a JSON body it cannot parse as a JSON-RPC message.
        return malformed(&body);
    }
    let mut response = if accepts_json {
        json_reply::prefer_json(response).await
    } else {
        response
    };
    // A call refused by a rate limit: 429 and when to retry (the body is the JSON-RPC
    // error), once the answer is whole.
    if let Some(seconds) = retry_after.seconds()
        && !json_reply::has_content_type(response.headers(), "text/event-stream")
    {
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// Whether the request's `Accept` takes a JSON body (`application/json`, `application/*` or
/// `*/*`).
fn accepts_json(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|range| range.split(';').next())
        .any(|range| {
            let range = range.trim();
            ["application/json", "application/*", "*/*"]
                .iter()
                .any(|accepted| range.eq_ignore_ascii_case(accepted))
        })
}

/// The JSON-RPC error for a body rmcp could not read as a message.
fn malformed(body: &Bytes) -> Response {
    match serde_json::from_slice::<Value>(body) {
        Err(e) => jsonrpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32700,
            &format!("Parse error: the body is not valid JSON ({e}); send one JSON-RPC message"),
        ),
        Ok(Value::Array(_)) => jsonrpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "Invalid Request: JSON-RPC batches (arrays) are not supported; send one message per request",
        ),
        Ok(value) => {
            let id = value
                .get("id")
                .filter(|id| id.is_string() || id.is_number())
                .cloned();
            jsonrpc_error(
                StatusCode::BAD_REQUEST,
                id,
                -32600,
                "Invalid Request: the body is JSON but not a JSON-RPC 2.0 message; a request needs \
                 \"jsonrpc\": \"2.0\", an \"id\" and a \"method\" (a notification has no \"id\")",
            )
        }
    }
}

/// A JSON-RPC error response with an HTTP status.
fn jsonrpc_error(status: StatusCode, id: Option<Value>, code: i64, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    });
    (status, axum::Json(body)).into_response()
}
