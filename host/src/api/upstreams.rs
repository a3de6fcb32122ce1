//! `GET /api/v1/upstreams`, `GET /api/v1/upstreams/{name}/analysis` and
//! `POST /api/v1/upstreams/{name}/approve`: reviewing quarantined servers and tools that
//! changed since approval, and approving them.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use crate::activity::Source;

use super::{ApiError, ApiState, ok};

/// `GET /upstreams`: every upstream with its state, tool count, quarantine and held tools.
pub async fn list(State(state): State<ApiState>) -> Response {
    ok(state.proxy.upstreams().statuses())
}

/// `GET /upstreams/{name}/analysis`: the security analysis (tools, standing, findings).
pub async fn analysis(
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
}

/// The longest `approved_by` kept.
const MAX_APPROVER_CHARS: usize = 128;

/// `POST /upstreams/{name}/approve` with `{"tools": [...]?, "approved_by": "..."?}`.
pub async fn approve(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Response, ApiError> {
    let body: ApproveBody = match body {
        None => ApproveBody::default(),
        Some(Json(value)) => serde_json::from_value(value).map_err(|e| {
            ApiError::bad_request(format!(
                "the body must look like {{\"tools\": [\"name\"], \"approved_by\": \"who\"}} (both optional): {e}"
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
        .approve(&name, body.tools, &by, Source::Api)
        .await
        .map_err(ApiError::bad_request)?;
    Ok(ok(approval))
}
