//! `GET /approvals` (the calls waiting for a person) and `POST /approvals/{id}/approve|deny`
//! (`{"reason": "..."}` optional): a person's answer to one waiting call. Answering needs the
//! API key, like every route here; it is never an MCP tool, so an agent cannot approve its
//! own calls through the endpoint it calls tools with.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::{ApiError, ApiState, ok};
use crate::proxy::Answer;

/// The longest `by` kept.
const MAX_BY_CHARS: usize = 64;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    reason: Option<String>,
    /// Who answers (`cli` for `mcpproxy approvals`); default `rest`.
    by: Option<String>,
}

/// `GET /approvals`: the calls waiting, oldest first (in a cluster, on every replica).
pub(super) async fn list(State(state): State<ApiState>) -> Response {
    ok(state.proxy.approvals().listed().await)
}

/// `POST /approvals/{id}/approve`.
pub(super) async fn approve(
    state: State<ApiState>,
    id: Path<String>,
    body: Option<Json<Value>>,
) -> Result<Response, ApiError> {
    answer(state, id, body, true).await
}

/// `POST /approvals/{id}/deny`.
pub(super) async fn deny(
    state: State<ApiState>,
    id: Path<String>,
    body: Option<Json<Value>>,
) -> Result<Response, ApiError> {
    answer(state, id, body, false).await
}

async fn answer(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
    approve: bool,
) -> Result<Response, ApiError> {
    let body: AnswerBody = match body {
        None => AnswerBody::default(),
        Some(Json(value)) => serde_json::from_value(value).map_err(|e| {
            ApiError::bad_request(format!(
                "the body must look like {{\"reason\": \"why\"}} (optional): {e}"
            ))
        })?,
    };
    let by: String = body
        .by
        .unwrap_or_else(|| "rest".to_owned())
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_BY_CHARS)
        .collect();
    state
        .proxy
        .approvals()
        .answer(
            &id,
            Answer {
                approve,
                by,
                reason: body.reason.filter(|r| !r.trim().is_empty()),
            },
        )
        .await
        .map_err(|e| match e {
            crate::proxy::AnswerError::NotWaiting(_) => ApiError::not_found(e.to_string()),
            crate::proxy::AnswerError::Shared { .. } => {
                ApiError::with_status(http::StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
        })?;
    Ok(ok(serde_json::json!({
        "id": id,
        "decision": if approve { "approved" } else { "denied" },
    })))
}
