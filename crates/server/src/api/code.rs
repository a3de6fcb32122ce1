//! `POST /api/v1/code/run`: runs a `code_execution` script (for `mcpproxy code run`), with
//! the same arguments, limits, policy and records as the MCP tool. Refused with 409 while
//! the config does not enable it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use crate::proxy::{CallContext, parse_code_request};
use mcpproxy_activity::Source;

use super::{ApiError, ApiState, ok};

pub(super) async fn run(
    State(state): State<ApiState>,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| ApiError {
        status: e.status(),
        message: format!("the body must be a JSON object: {}", e.body_text()),
    })?;
    let Value::Object(mut body) = body else {
        return Err(ApiError::bad_request(
            "the body must be a JSON object like {\"code\": \"return 1\", \"input\": null}",
        ));
    };
    let source = match body.remove("source") {
        None => Source::Api,
        Some(Value::String(s)) if s == "api" => Source::Api,
        Some(Value::String(s)) if s == "cli" => Source::Cli,
        Some(_) => return Err(ApiError::bad_request("source must be \"api\" or \"cli\"")),
    };
    let Some(executor) = state.proxy.code_execution() else {
        return Err(ApiError::with_status(
            StatusCode::CONFLICT,
            "code_execution is disabled: set \"code_execution\": {\"enabled\": true} in \
             mcp_config.json and restart mcpproxy",
        ));
    };
    let request = parse_code_request(&body, &executor.config).map_err(ApiError::bad_request)?;
    Ok(ok(state
        .proxy
        .execute_code(request, CallContext::new(source))
        .await))
}
