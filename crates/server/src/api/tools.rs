//! `POST /api/v1/tools/call`, `GET /api/v1/tools/search` and `GET /api/v1/tools`: calling
//! and finding upstream tools with the same pipeline and records as MCP clients.

use std::collections::HashMap;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::proxy::{CallContext, parse_call};
use mcpproxy_activity::Source;
use mcpproxy_policy::OperationType;

use super::{ApiError, ApiState, ok};

/// Keys of the call body besides those of the MCP call variants.
const CONTROL_KEYS: &[&str] = &["variant", "dry_run", "timeout_ms", "source", "request_id"];

pub(super) async fn call(
    State(state): State<ApiState>,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|e| {
        // 413 for a body over the limit, 415 for a wrong content type, 400 for bad JSON.
        let status = e.status();
        let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "the body is larger than 2 MiB, the most this endpoint accepts".to_owned()
        } else {
            format!("the body must be a JSON object: {}", e.body_text())
        };
        ApiError { status, message }
    })?;
    let Value::Object(mut body) = body else {
        return Err(ApiError::bad_request(
            "the body must be a JSON object like {\"name\": \"server:tool\", \"variant\": \"read\"}",
        ));
    };
    let control: Map<String, Value> = CONTROL_KEYS
        .iter()
        .filter_map(|k| body.remove(*k).map(|v| ((*k).to_owned(), v)))
        .collect();
    let variant: OperationType = match control.get("variant") {
        Some(Value::String(v)) => v.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "variant '{v}' is not valid: use read, write or destructive"
            ))
        })?,
        Some(_) | None => {
            return Err(ApiError::bad_request(
                "variant is required: read, write or destructive",
            ));
        }
    };
    let dry_run = match control.get("dry_run") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::bad_request("dry_run must be true or false")),
    };
    let timeout = match control.get("timeout_ms") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(ms) if (1..=3_600_000).contains(&ms) => Some(Duration::from_millis(ms)),
            _ => {
                return Err(ApiError::bad_request(
                    "timeout_ms must be a whole number from 1 to 3600000",
                ));
            }
        },
    };
    let source = match control.get("source").and_then(Value::as_str) {
        None => Source::Api,
        Some("api") => Source::Api,
        Some("cli") => Source::Cli,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "source '{other}' is not valid: use api or cli"
            )));
        }
    };
    let request_id = match control.get("request_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id))
            if !id.is_empty() && id.len() <= 64 && !id.chars().any(char::is_control) =>
        {
            Some(id.clone())
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "request_id must be a string of 1 to 64 characters, no control characters",
            ));
        }
    };
    let mut context = CallContext::new(source);
    context.dry_run = dry_run;
    context.timeout = timeout;
    context.request_id = request_id;
    let input = match parse_call(variant, &body) {
        Ok(input) => input,
        Err(message) => {
            state
                .proxy
                .record_malformed_call(variant, &body, &message, &context)
                .await;
            return Err(ApiError::bad_request(message));
        }
    };
    Ok(ok(state.proxy.call_reported(input, context).await))
}

pub(super) async fn search(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let q = query
        .get("q")
        .cloned()
        .ok_or_else(|| ApiError::bad_request("q is required: the words to search for"))?;
    let limit = match query.get("limit") {
        None => 15,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "limit '{v}' is not valid: use a whole number from 1 to 100"
                )));
            }
        },
    };
    let tools = state
        .proxy
        .retrieve(q, limit)
        .await
        .map_err(|e| ApiError::internal("the search failed", e))?;
    Ok(ok(json!({"tools": tools, "total": tools.len()})))
}

pub(super) async fn list(
    State(state): State<ApiState>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let tools = state
        .proxy
        .list_tools(query.get("server").cloned())
        .await
        .map_err(ApiError::bad_request)?;
    Ok(ok(json!({"tools": tools, "total": tools.len()})))
}
