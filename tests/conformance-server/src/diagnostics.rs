//! The diagnostic tools of the `server-stateless` scenario (SEP-2575, protocol
//! 2026-07-28): one that needs the client's sampling capability, one that needs input
//! while it runs (answered with an `InputRequiredResult`, never a request on the
//! response stream), one that logs only when the request asks for a log level, and the
//! triggers that announce tool and prompt list changes to `subscriptions/listen` streams.

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        InputRequest, InputRequiredResult, JsonObject, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use crate::{changes::Change, server::Fixture};

pub const MISSING_CAPABILITY: &str = "test_missing_capability";
pub const STREAMING_ELICITATION: &str = "test_streaming_elicitation";
pub const LOGGING: &str = "test_logging_tool";
pub const TRIGGER_TOOL_CHANGE: &str = "test_trigger_tool_change";
pub const TRIGGER_PROMPT_CHANGE: &str = "test_trigger_prompt_change";

/// The request `_meta` key naming the log level a 2026-07-28 client wants.
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";

const TOOLS: &[(&str, &str)] = &[
    (
        MISSING_CAPABILITY,
        "Needs the client's sampling capability; -32021 without it",
    ),
    (
        STREAMING_ELICITATION,
        "Needs the user's input, asked through an InputRequiredResult",
    ),
    (
        LOGGING,
        "Logs a message only when the request's _meta asks for a log level",
    ),
    (
        TRIGGER_TOOL_CHANGE,
        "Announces a tool-list change to subscriptions/listen streams",
    ),
    (
        TRIGGER_PROMPT_CHANGE,
        "Announces a prompt-list change to subscriptions/listen streams",
    ),
];

pub fn tools() -> Vec<Tool> {
    let schema = match json!({ "type": "object", "properties": {} }) {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    TOOLS
        .iter()
        .map(|(name, description)| Tool::new(*name, *description, schema.clone()))
        .collect()
}

pub fn is_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, _)| *tool == name)
}

fn declared(context: &RequestContext<RoleServer>, capability: &str) -> bool {
    context
        .client_capabilities()
        .and_then(|capabilities| serde_json::to_value(capabilities).ok())
        .is_some_and(|capabilities| capabilities.get(capability).is_some())
}

/// -32021 naming `capability` as the one missing.
fn missing(capability: &str) -> McpError {
    match serde_json::from_value::<ClientCapabilities>(json!({ capability: {} })) {
        Ok(required) => McpError::missing_required_client_capability(required),
        Err(error) => McpError::internal_error(format!("cannot name {capability}: {error}"), None),
    }
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

impl Fixture {
    /// `tools/call` of one of [`TOOLS`].
    pub async fn call_diagnostic_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match request.name.as_ref() {
            MISSING_CAPABILITY => {
                if !declared(context, "sampling") {
                    return Err(missing("sampling"));
                }
                Ok(text("the client declared sampling"))
            }
            STREAMING_ELICITATION => {
                if !declared(context, "elicitation") {
                    return Err(missing("elicitation"));
                }
                if let Some(answer) = request
                    .input_responses
                    .as_ref()
                    .and_then(|responses| responses.get("confirm"))
                {
                    return Ok(text(format!("the user answered {answer}")));
                }
                let confirm: InputRequest = serde_json::from_value(json!({
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "Continue?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": { "ok": { "type": "boolean" } },
                            "required": ["ok"],
                        },
                    },
                }))
                .map_err(|error| McpError::internal_error(error.to_string(), None))?;
                Ok(CallToolResponse::InputRequired(
                    InputRequiredResult::from_input_requests(
                        [("confirm".to_owned(), confirm)].into_iter().collect(),
                    ),
                ))
            }
            LOGGING => {
                let level = context.meta.get(LOG_LEVEL_KEY).cloned();
                let Some(level) = level else {
                    return Ok(text("no log level requested, nothing logged"));
                };
                #[allow(deprecated)] // MCP logging (SEP-2577).
                let sent = match serde_json::from_value::<rmcp::model::LoggingLevel>(level.clone())
                {
                    Ok(level) => {
                        self.session
                            .log_level
                            .log(&context.peer, level, json!("test_logging_tool ran"))
                            .await
                    }
                    Err(_) => false,
                };
                Ok(text(format!("log level {level} requested; logged: {sent}")))
            }
            TRIGGER_TOOL_CHANGE => {
                let reached = self.shared.changes.publish(Change::Tools);
                Ok(text(format!(
                    "tool-list change announced to {reached} stream(s)"
                )))
            }
            TRIGGER_PROMPT_CHANGE => {
                let reached = self.shared.changes.publish(Change::Prompts);
                Ok(text(format!(
                    "prompt-list change announced to {reached} stream(s)"
                )))
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool: {other}"),
                Some(json!({ "name": other })),
            )),
        }
    }
}
