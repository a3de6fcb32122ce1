//! `GET /api/v1/upstreams`, `GET /api/v1/upstreams/{name}/analysis` and
//! `POST /api/v1/upstreams/{name}/approve`: reviewing quarantined servers and tools that
//! changed since approval, and approving them. `POST /api/v1/upstreams`,
//! `PATCH|DELETE /api/v1/upstreams/{name}`, `POST .../restart` and `GET .../logs`: changing
//! the servers while running ([`crate::manage`]).

use axum::Json;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use crate::manage::{self, Actor, Approve, Change, Manager};
use mcpproxy_activity::Source;

use super::{ApiError, ApiState, ok};

/// `GET /upstreams`: every upstream with its state, tool count, quarantine and held tools.
pub(super) async fn list(State(state): State<ApiState>) -> Response {
    ok(state.proxy.upstreams().statuses())
}

/// `GET /upstreams/{name}/analysis`: the security analysis (tools, standing, findings).
pub(super) async fn analysis(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let analysis = state
        .proxy
        .analysis(&name)
        .await
        .map_err(ApiError::not_found)?;
    Ok(ok(analysis))
}

/// The approval body: which tools (all, and the quarantine lifted, when absent), and who.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    approved_by: Option<String>,
    /// Approve only how the server starts: it starts quarantined, for review.
    #[serde(default)]
    launch_only: bool,
    /// The fingerprint of the launch reviewed (`launch_fingerprint` of the analysis):
    /// required when the approval approves how the server starts, checked whenever given.
    #[serde(default)]
    fingerprint: Option<String>,
}

/// The longest `approved_by` kept.
const MAX_APPROVER_CHARS: usize = 128;

/// `POST /upstreams/{name}/approve` with `{"tools": [...]?, "approved_by": "..."?,
/// "launch_only": bool?, "fingerprint": "..."?}`.
pub(super) async fn approve(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Response, ApiError> {
    let body: ApproveBody = match body {
        None => ApproveBody::default(),
        Some(Json(value)) => serde_json::from_value(value).map_err(|e| {
            ApiError::bad_request(format!(
                "the body must look like {{\"fingerprint\": \"the launch_fingerprint of GET /api/v1/upstreams/NAME/analysis\", \"tools\": [\"name\"], \"approved_by\": \"who\", \"launch_only\": false}} (all optional, but approving how a server starts needs the fingerprint): {e}"
            ))
        })?,
    };
    if state.proxy.upstreams().get(&name).is_none() {
        return Err(ApiError::not_found(format!("unknown server '{name}'")));
    }
    let by: String = body
        .approved_by
        .unwrap_or_else(|| "api".to_owned())
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_APPROVER_CHARS)
        .collect();
    let approval = state
        .proxy
        .approve(
            &name,
            body.tools,
            &by,
            Source::Api,
            body.launch_only,
            body.fingerprint.as_deref(),
        )
        .await
        .map_err(ApiError::bad_request)?;
    Ok(ok(approval))
}

fn manager(state: &ApiState) -> Result<&std::sync::Arc<Manager>, ApiError> {
    state.manager.as_ref().ok_or_else(|| {
        ApiError::with_status(
            http::StatusCode::CONFLICT,
            "this mcpproxy cannot change its servers (it was started without a config file to write)",
        )
    })
}

fn change_error(e: manage::Error) -> ApiError {
    use axum::http::StatusCode;
    let status = match &e {
        manage::Error::UnknownServer(_)
        | manage::Error::Edit(mcpproxy_config::document::EditError::NoSuchServer(_)) => {
            StatusCode::NOT_FOUND
        }
        manage::Error::Edit(mcpproxy_config::document::EditError::Exists(_)) => {
            StatusCode::CONFLICT
        }
        manage::Error::ReadOnly { .. } => StatusCode::FORBIDDEN,
        manage::Error::Write { .. } | manage::Error::Read { .. } | manage::Error::NoConfigFile => {
            return ApiError::internal("cannot change the config file", e);
        }
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::with_status(status, e.to_string())
}

/// `?approve=true`: the change also approves the server's calls (else a server it adds or
/// whose launch it changes starts quarantined). Nothing else is accepted.
fn approve_param(query: &HashMap<String, String>) -> Result<Approve, ApiError> {
    if let Some(unknown) = query.keys().find(|k| k.as_str() != "approve") {
        return Err(ApiError::bad_request(format!(
            "unknown query parameter '{}': only approve=true|false is accepted",
            mcpproxy_support::quote(unknown)
        )));
    }
    match query.get("approve").map(String::as_str) {
        None | Some("false") => Ok(Approve::Launch),
        Some("true") => Ok(Approve::Server),
        Some(other) => Err(ApiError::bad_request(format!(
            "approve must be true or false, not '{}'",
            mcpproxy_support::quote(other)
        ))),
    }
}

/// `POST /upstreams[?approve=true]` with a `mcpServers` entry (`name` included).
pub(super) async fn add(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
    Json(entry): Json<Value>,
) -> Result<Response, ApiError> {
    let manager = manager(&state)?;
    let Some(name) = entry.get("name").and_then(Value::as_str).map(str::to_owned) else {
        return Err(ApiError::bad_request(
            "the body is a server entry with its name: {\"name\": \"fs\", \"command\": \"npx\", \"args\": [...]}",
        ));
    };
    let applied = manager
        .change(
            Change::Add { name, entry },
            Actor::Person,
            approve_param(&query)?,
        )
        .await
        .map_err(change_error)?;
    Ok(ok(manage::applied_json(&applied)))
}

/// `DELETE /upstreams/{name}`.
pub(super) async fn remove(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let applied = manager(&state)?
        .change(Change::Remove { name }, Actor::Person, Approve::Launch)
        .await
        .map_err(change_error)?;
    Ok(ok(manage::applied_json(&applied)))
}

/// `PATCH /upstreams/{name}[?approve=true]` with a deep-merge patch of its entry.
pub(super) async fn patch(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    Json(patch): Json<Value>,
) -> Result<Response, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "the body is an object of the fields to change, e.g. {\"enabled\": false}",
        ));
    }
    let applied = manager(&state)?
        .change(
            Change::Patch { name, patch },
            Actor::Person,
            approve_param(&query)?,
        )
        .await
        .map_err(change_error)?;
    Ok(ok(manage::applied_json(&applied)))
}

/// `POST /upstreams/{name}/restart`.
pub(super) async fn restart(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    manager(&state)?
        .restart(&name)
        .await
        .map_err(change_error)?;
    state.proxy.metrics().upstream_restarted(&name);
    Ok(ok(serde_json::json!({"restarted": name})))
}

#[derive(Debug, Deserialize)]
pub(super) struct LogsQuery {
    lines: Option<usize>,
}

/// `GET /upstreams/{name}/logs?lines=N`: the last N (at most 500) stderr lines.
pub(super) async fn logs(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(query): Query<LogsQuery>,
) -> Result<Response, ApiError> {
    let lines = query
        .lines
        .unwrap_or(50)
        .clamp(1, mcpproxy_upstream::log::MAX_LINES);
    let (lines, total) = manager(&state)?.logs(&name, lines).map_err(change_error)?;
    Ok(ok(
        serde_json::json!({"server": name, "lines": lines, "total_lines": total}),
    ))
}
