//! The REST API's routes under `/api/v1`, the state its handlers share ([`ApiState`]), the
//! key check on every route and the error type that answers a refused or failed request
//! ([`ApiError`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::json;

use crate::proxy::Proxy;
use mcpproxy_activity::Delivery;
use mcpproxy_activity::Journal;
use mcpproxy_auth::access::Access;

/// What the handlers share.
#[derive(Clone)]
pub struct ApiState {
    pub proxy: Arc<Proxy>,
    pub journal: Arc<Journal>,
    /// The sink delivery tasks, when this process runs them.
    pub delivery: Option<Arc<Delivery>>,
    pub api_key: Arc<str>,
    /// `Host` and `Origin` values accepted besides loopback (DNS-rebinding protection).
    pub access: Arc<Access>,
    /// `GET /metrics` without the key (`http.metrics_public`).
    pub metrics_public: bool,
    /// Changes to the upstream servers, when this process can make them.
    pub manager: Option<Arc<crate::manage::Manager>>,
    /// Reloads the policy plugins, when this process runs the proxy.
    pub reloader: Option<Arc<crate::runtime::Reloader>>,
    /// The cluster's journal (`cluster=true` on the activity endpoints), or why there is
    /// none (no `cluster.journal`, or its sink's settings do not say where it is).
    pub cluster_journal: Result<Arc<mcpproxy_cluster::journal::ClusterJournal>, String>,
    /// The address this process serves HTTP on, once its listener is bound (never, when it
    /// serves stdio): `GET /status` says it, so `client add --http` writes the address that
    /// answers, not the config's default.
    pub listening: Arc<std::sync::OnceLock<std::net::SocketAddr>>,
}

/// `/api/v1/...`, with the key check on every route.
pub fn router(state: ApiState) -> Router {
    let routes = Router::new()
        .route("/status", get(status))
        .route("/activity", get(super::activity::list))
        .route("/activity/sinks", get(super::activity::sinks))
        .route("/activity/export", get(super::activity::export))
        .route("/activity/stats", get(super::activity::stats))
        .route("/activity/verify", get(super::activity::verify))
        .route("/activity/checkpoint", get(super::activity::checkpoint))
        .route("/activity/stream", get(super::activity::stream))
        .route("/activity/{id}", get(super::activity::show))
        .route("/tools", get(super::tools::list))
        .route("/tools/search", get(super::tools::search))
        .route("/tools/call", post(super::tools::call))
        .route("/code/run", post(super::code::run))
        .route(
            "/upstreams",
            get(super::upstreams::list).post(super::upstreams::add),
        )
        .route(
            "/upstreams/{name}",
            axum::routing::delete(super::upstreams::remove).patch(super::upstreams::patch),
        )
        .route("/upstreams/{name}/restart", post(super::upstreams::restart))
        .route("/upstreams/{name}/logs", get(super::upstreams::logs))
        .route(
            "/upstreams/{name}/analysis",
            get(super::upstreams::analysis),
        )
        .route("/upstreams/{name}/approve", post(super::upstreams::approve))
        .route(
            "/upstreams/{name}/login",
            post(super::login::begin).delete(super::login::logout),
        )
        .route(
            "/upstreams/{name}/login/callback",
            post(super::login::finish),
        )
        .route("/approvals", get(super::approvals::list))
        .route("/approvals/{id}/approve", post(super::approvals::approve))
        .route("/approvals/{id}/deny", post(super::approvals::deny))
        .route("/plugins", get(super::plugins::in_force))
        .route("/plugins/reload", post(super::plugins::reload))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_key,
        ))
        // Outermost: a foreign Host or Origin is refused before anything else.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            check_host_and_origin,
        ))
        .with_state(state.clone());
    let probes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route(super::login::CALLBACK_PATH, get(super::login::callback))
        .route(
            "/metrics",
            get(metrics).layer(axum::middleware::from_fn_with_state(
                state.clone(),
                require_key_unless_public,
            )),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            check_host_and_origin,
        ))
        .with_state(state);
    Router::new().nest("/api/v1", routes).merge(probes)
}

/// `GET /healthz`: the process answers. No key: it says nothing but "ok".
async fn healthz() -> Response {
    (StatusCode::OK, "ok\n").into_response()
}

/// `GET /readyz`: 200 when the journal writes and can be read and no enabled upstream is
/// still on its first connection attempt; 503 otherwise. Without the API key the body says
/// only `{"ready": ...}`; with it (`X-API-Key` or `?apikey=`), why: the journal's state and
/// reason and each upstream's state. A wrong key is refused (401).
async fn readyz(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
    headers: http::HeaderMap,
) -> Response {
    let given = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| query.get("apikey").cloned());
    let details = match given {
        None => false,
        Some(key) if super::key::matches(&state.api_key, &key) => true,
        Some(_) => {
            return unauthorized("the API key is wrong; `mcpproxy api-key` prints the right one");
        }
    };
    let mut health = state.journal.health();
    if health.is_ok()
        && let Err(e) = state.journal.stats()
    {
        health = mcpproxy_activity::JournalHealth {
            state: "failing",
            reason: Some(e.to_string()),
            since: None,
        };
    }
    let upstreams: serde_json::Map<String, serde_json::Value> = state
        .proxy
        .upstreams()
        .statuses()
        .into_iter()
        .map(|s| (s.name, json!(s.state.to_string())))
        .collect();
    let connecting = upstreams
        .values()
        .any(|s| s == "connecting" || s == "disconnected");
    let ready = health.is_ok() && !connecting;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = if details {
        let mut body = json!({"ready": ready, "journal": health.state, "upstreams": upstreams});
        if let Some(reason) = health.reason {
            body["journal_reason"] = json!(reason);
        }
        body
    } else {
        json!({"ready": ready})
    };
    (status, Json(body)).into_response()
}

/// `GET /metrics`: the Prometheus (OpenMetrics) text, gauges read now.
async fn metrics(State(state): State<ApiState>) -> Response {
    let metrics = state.proxy.metrics();
    metrics.set_upstreams(state.proxy.upstreams().statuses().into_iter().map(|s| {
        let state = if s.quarantined {
            "quarantined".to_owned()
        } else {
            // `error: <why>` as a label would be one label set per message.
            s.state.kind().to_owned()
        };
        crate::metrics::UpstreamGauge {
            server: s.name,
            state,
            tools: s.tools as u64,
        }
    }));
    metrics.set_approvals_pending(state.proxy.approvals().pending().len());
    if let Ok(stats) = state.journal.stats() {
        metrics.set_journal(stats.file_bytes, stats.records);
    }
    metrics.set_journal_health(state.journal.health().reason.as_deref());
    let sinks = match &state.delivery {
        Some(delivery) => delivery.report(),
        None => mcpproxy_activity::offline_report(&state.journal),
    };
    if let Ok(sinks) = sinks {
        metrics.set_sinks(sinks.into_iter().map(|s| crate::metrics::SinkGauge {
            sink: s.status.name,
            backlog: s.status.backlog,
            lag: std::time::Duration::from_millis(s.status.lag_ms.unwrap_or(0)),
            failures: s.status.state.failures,
            delivered: s.status.state.delivered,
            dropped: s.status.state.dropped,
        }));
    }
    (
        [(http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        metrics.encode(),
    )
        .into_response()
}

async fn require_key_unless_public(
    State(state): State<ApiState>,
    query: Query<HashMap<String, String>>,
    request: Request,
    next: Next,
) -> Response {
    if state.metrics_public {
        return next.run(request).await;
    }
    require_key(State(state), query, request, next).await
}

/// An API error: a status and a message for the caller.
#[derive(Debug)]
pub struct ApiError {
    pub(super) status: StatusCode,
    pub(super) message: String,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn with_status(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }

    /// Logs the real error; the caller sees only that something failed.
    pub fn internal(context: &str, error: impl std::fmt::Display) -> Self {
        tracing::error!("{context}: {error}");
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!("{context}; see the mcpproxy log for details"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"success": false, "data": null, "error": self.message});
        (self.status, Json(body)).into_response()
    }
}

/// The success envelope.
pub fn ok<T: Serialize>(data: T) -> Response {
    Json(json!({"success": true, "data": data, "error": null})).into_response()
}

async fn require_key(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| query.get("apikey").cloned());
    match given {
        Some(key) if super::key::matches(&state.api_key, &key) => next.run(request).await,
        Some(_) => unauthorized("the API key is wrong; `mcpproxy api-key` prints the right one"),
        None => unauthorized(
            "an API key is required: send it in the X-API-Key header (or ?apikey=); `mcpproxy api-key` prints it",
        ),
    }
}

fn unauthorized(message: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"success": false, "data": null, "error": message})),
    )
        .into_response()
}

/// Refuses requests whose `Host` or `Origin` is not a loopback name or configured, so a
/// web page cannot reach the API through DNS rebinding.
async fn check_host_and_origin(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    match state.access.check(request.headers()) {
        Err(message) => forbidden(&message),
        Ok(()) => next.run(request).await,
    }
}

fn forbidden(message: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(json!({"success": false, "data": null, "error": message})),
    )
        .into_response()
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        message: "this endpoint does not take that method; see docs/rest-api.md".into(),
    }
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see docs/rest-api.md for the API")
}

async fn status(State(state): State<ApiState>) -> Response {
    ok(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "listening": state.listening.get().map(|bound| format!("http://{bound}/mcp")),
        "upstreams": state.proxy.upstreams().statuses(),
        "journal": state.journal.health(),
    }))
}
