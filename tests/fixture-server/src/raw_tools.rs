//! `--raw-tools FILE`: tools/list entries written as raw JSON, appended to every listing,
//! so a test can have the fixture list what rmcp's typed [`rmcp::model::Tool`] cannot hold:
//! a hint of the wrong type (`"readOnlyHint": "true"`), a tool without a name, an
//! `inputSchema` that is not an object.
//!
//! The file holds a JSON array of entries, each sent as written:
//!
//! ```json
//! [
//!   {"name": "bad_hint", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "true"}},
//!   {"description": "I have no name", "inputSchema": {"type": "object"}}
//! ]
//! ```
//!
//! It is re-read at every listing (a missing file, or one that is not a JSON array, adds
//! nothing, with a warning for the latter). A `tools/call` of an entry's `name` (a string)
//! answers `raw NAME` (see `Fixture::call_tool`).
//!
//! rmcp's server only sends typed results, so the entries are added to the listing once it
//! is JSON: over stdio by [`Served`], a [`Service`] around the fixture that answers
//! `tools/list` with an untyped result; over streamable HTTP (whose service takes a
//! `ServerHandler` only) by [`add_to_http_listings`], a layer that rewrites the answer to a
//! `tools/list` request on its way out.

use std::{path::PathBuf, sync::Arc};

use axum::{
    body::Body,
    extract::{Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData as McpError, RoleServer, Service,
    model::{ClientNotification, ClientRequest, CustomResult, ServerConfig, ServerResult},
    service::{NotificationContext, RequestContext},
};
use serde_json::Value;

use crate::server::Fixture;

/// The largest request or listing the HTTP layer reads whole.
const MAX_BODY_BYTES: usize = 16 << 20;

/// The raw entries file.
#[derive(Debug, Clone)]
pub struct RawTools(Arc<PathBuf>);

impl RawTools {
    pub fn new(path: PathBuf) -> Self {
        Self(Arc::new(path))
    }

    /// The entries as the file holds them now.
    pub fn entries(&self) -> Vec<Value> {
        let Ok(text) = std::fs::read_to_string(self.0.as_ref()) else {
            return Vec::new();
        };
        match serde_json::from_str(&text) {
            Ok(Value::Array(entries)) => entries,
            _ => {
                tracing::warn!(path = %self.0.display(), "the raw tools file is not a JSON array; adding none");
                Vec::new()
            }
        }
    }

    /// Whether an entry is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.entries()
            .iter()
            .any(|e| e.get("name").and_then(Value::as_str) == Some(name))
    }

    /// Appends the entries to the `tools` of a `tools/list` result.
    fn extend(&self, result: &mut Value) {
        if let Some(Value::Array(tools)) = result.get_mut("tools") {
            tools.extend(self.entries());
        }
    }
}

/// The fixture over stdio, with the raw entries added to its listings.
#[derive(Debug, Clone)]
pub struct Served {
    fixture: Fixture,
    raw_tools: Option<RawTools>,
}

impl Served {
    pub fn new(fixture: Fixture, raw_tools: Option<RawTools>) -> Self {
        Self { fixture, raw_tools }
    }
}

impl Service<RoleServer> for Served {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        let raw = match (&self.raw_tools, &request) {
            (Some(raw), ClientRequest::ListToolsRequest(_)) => raw.clone(),
            _ => return Service::handle_request(&self.fixture, request, context).await,
        };
        let listed = Service::handle_request(&self.fixture, request, context).await?;
        let mut listed = serde_json::to_value(listed)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        raw.extend(&mut listed);
        Ok(ServerResult::CustomResult(CustomResult::new(listed)))
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        Service::handle_notification(&self.fixture, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.fixture)
    }

    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        Service::supported_protocol_versions(&self.fixture)
    }
}

/// An axum middleware: the answer to a `tools/list` request gets the raw entries, whether
/// it is sent as JSON or as an event stream (each `data:` line rewritten).
pub async fn add_to_http_listings(
    State(raw): State<RawTools>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
        )
            .into_response();
    };
    let is_listing = serde_json::from_slice::<Value>(&bytes)
        .is_ok_and(|message| message.get("method").and_then(Value::as_str) == Some("tools/list"));
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if !is_listing {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "listing too large",
        )
            .into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    let rewrite = |json: &str| -> Option<String> {
        let mut message: Value = serde_json::from_str(json).ok()?;
        raw.extend(message.get_mut("result")?);
        Some(message.to_string())
    };
    let rewritten = match rewrite(&text) {
        Some(json) => json,
        None => text
            .split('\n')
            .map(|line| match line.strip_prefix("data:") {
                Some(data) => rewrite(data.trim_start())
                    .map_or_else(|| line.to_owned(), |json| format!("data: {json}")),
                None => line.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(rewritten))
}
