//! The tools of the `tools-*`, `elicitation-*`, `json-schema-*`, `server-sse-*` and
//! `http-custom-header-*` scenarios (the last one's `x-mcp-header` parameter is
//! checked against its header by rmcp's HTTP transport), plus
//! `touch_watched_resource`, which changes the watched resource so a subscribed
//! client gets `notifications/resources/updated` (on its session, or on its
//! `subscriptions/listen` stream).
//!
//! Sampling and elicitation are real server-to-client requests on the session
//! (`sampling/createMessage`, `elicitation/create`), built as JSON so the wire
//! carries exactly the messages and schemas the scenarios describe.

use std::time::Duration;

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolResponse, CallToolResult, ClientResult, ContentBlock, CustomRequest, JsonObject,
        ProgressNotificationParam, ResourceContents, ResourceUpdatedNotificationParam,
        ServerRequest, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use crate::{changes::Change, media, resources, server::Fixture};

/// The pause between the steps of the logging and progress tools.
const STEP: Duration = Duration::from_millis(50);

/// One tool's name, description and input schema.
struct Spec {
    name: &'static str,
    description: &'static str,
    schema: fn() -> Value,
}

fn no_arguments() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn prompt_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "prompt": { "type": "string", "description": "The prompt to send to the LLM" } },
        "required": ["prompt"],
    })
}

fn message_argument() -> Value {
    json!({
        "type": "object",
        "properties": { "message": { "type": "string", "description": "The message to show the user" } },
        "required": ["message"],
    })
}

/// A string parameter mirrored in the `Mcp-Param-Region` HTTP header (SEP-2243).
fn header_argument() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": { "type": "string", "description": "A region name", "x-mcp-header": "Region" },
        },
        "required": ["region"],
    })
}

/// The schema of `json-schema-2020-12`, keyword for keyword.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": { "street": { "type": "string" }, "city": { "type": "string" } },
            },
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" },
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false,
    })
}

pub const SIMPLE_TEXT: &str = "test_simple_text";
pub const IMAGE: &str = "test_image_content";
pub const AUDIO: &str = "test_audio_content";
pub const EMBEDDED_RESOURCE: &str = "test_embedded_resource";
pub const MIXED: &str = "test_multiple_content_types";
pub const LOGGING: &str = "test_tool_with_logging";
pub const ERROR: &str = "test_error_handling";
pub const PROGRESS: &str = "test_tool_with_progress";
pub const SAMPLING: &str = "test_sampling";
pub const ELICITATION: &str = "test_elicitation";
pub const ELICITATION_DEFAULTS: &str = "test_elicitation_sep1034_defaults";
pub const ELICITATION_ENUMS: &str = "test_elicitation_sep1330_enums";
pub const JSON_SCHEMA: &str = "json_schema_2020_12_tool";
pub const RECONNECTION: &str = "test_reconnection";
pub const TOUCH: &str = "touch_watched_resource";
pub const CUSTOM_HEADER: &str = "test_custom_header";

const SPECS: &[Spec] = &[
    Spec {
        name: SIMPLE_TEXT,
        description: "Returns simple text content",
        schema: no_arguments,
    },
    Spec {
        name: IMAGE,
        description: "Returns image content (a PNG)",
        schema: no_arguments,
    },
    Spec {
        name: AUDIO,
        description: "Returns audio content (a WAV)",
        schema: no_arguments,
    },
    Spec {
        name: EMBEDDED_RESOURCE,
        description: "Returns an embedded text resource",
        schema: no_arguments,
    },
    Spec {
        name: MIXED,
        description: "Returns text, image and resource content",
        schema: no_arguments,
    },
    Spec {
        name: LOGGING,
        description: "Sends three info log messages while it runs",
        schema: no_arguments,
    },
    Spec {
        name: ERROR,
        description: "Always returns a tool error",
        schema: no_arguments,
    },
    Spec {
        name: PROGRESS,
        description: "Reports progress 0, 50 and 100 of 100",
        schema: no_arguments,
    },
    Spec {
        name: SAMPLING,
        description: "Asks the client to sample an LLM with the prompt",
        schema: prompt_argument,
    },
    Spec {
        name: ELICITATION,
        description: "Asks the client for a username and an email",
        schema: message_argument,
    },
    Spec {
        name: ELICITATION_DEFAULTS,
        description: "Elicits fields that all have defaults (SEP-1034)",
        schema: no_arguments,
    },
    Spec {
        name: ELICITATION_ENUMS,
        description: "Elicits the five enum forms (SEP-1330)",
        schema: no_arguments,
    },
    Spec {
        name: JSON_SCHEMA,
        description: "Tool with JSON Schema 2020-12 features",
        schema: json_schema_2020_12,
    },
    Spec {
        name: RECONNECTION,
        description: "Answers after a short pause (SSE polling, SEP-1699)",
        schema: no_arguments,
    },
    Spec {
        name: CUSTOM_HEADER,
        description: "Echoes its region, which clients also send as the Mcp-Param-Region header",
        schema: header_argument,
    },
    Spec {
        name: TOUCH,
        description: "Changes test://watched-resource and notifies subscribers",
        schema: no_arguments,
    },
];

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// Every tool, in a fixed order.
pub fn list() -> Vec<Tool> {
    SPECS
        .iter()
        .map(|spec| Tool::new(spec.name, spec.description, object((spec.schema)())))
        .collect()
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// A string argument, or invalid params naming it.
fn string_argument<'a>(arguments: &'a JsonObject, name: &str) -> Result<&'a str, McpError> {
    arguments.get(name).and_then(Value::as_str).ok_or_else(|| {
        McpError::invalid_params(
            format!("missing required string argument '{name}'"),
            Some(json!({ "argument": name })),
        )
    })
}

impl Fixture {
    /// `tools/call`.
    pub async fn call_tool_named(
        &self,
        name: &str,
        arguments: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let result = match name {
            SIMPLE_TEXT => text("This is a simple text response for testing."),
            IMAGE => CallToolResult::success(vec![ContentBlock::image(
                media::PNG_BASE64,
                media::PNG_MIME,
            )]),
            AUDIO => CallToolResult::success(vec![ContentBlock::audio(
                media::WAV_BASE64,
                media::WAV_MIME,
            )]),
            EMBEDDED_RESOURCE => CallToolResult::success(vec![ContentBlock::resource(
                ResourceContents::text(
                    "This is an embedded resource content.",
                    "test://embedded-resource",
                )
                .with_mime_type("text/plain"),
            )]),
            MIXED => CallToolResult::success(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(media::PNG_BASE64, media::PNG_MIME),
                ContentBlock::resource(
                    ResourceContents::text(
                        json!({ "test": "data", "value": 123 }).to_string(),
                        "test://mixed-content-resource",
                    )
                    .with_mime_type("application/json"),
                ),
            ]),
            LOGGING => self.logging_tool(context).await,
            ERROR => CallToolResult::error(vec![ContentBlock::text(
                "This tool intentionally returns an error for testing",
            )]),
            PROGRESS => progress_tool(context).await,
            SAMPLING => {
                let prompt = string_argument(arguments, "prompt")?;
                sampling_tool(prompt, context).await
            }
            ELICITATION => {
                let message = string_argument(arguments, "message")?;
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" },
                    },
                    "required": ["username", "email"],
                });
                elicit(message, schema, "User response", context).await
            }
            ELICITATION_DEFAULTS => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "description": "Name", "default": "John Doe" },
                        "age": { "type": "integer", "description": "Age", "default": 30 },
                        "score": { "type": "number", "description": "Score", "default": 95.5 },
                        "status": {
                            "type": "string",
                            "description": "Status",
                            "enum": ["active", "inactive", "pending"],
                            "default": "active",
                        },
                        "verified": { "type": "boolean", "description": "Verified", "default": true },
                    },
                });
                elicit(
                    "Please review these values (all have defaults)",
                    schema,
                    "Elicitation completed",
                    context,
                )
                .await
            }
            ELICITATION_ENUMS => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                        "titledSingle": {
                            "type": "string",
                            "oneOf": [
                                { "const": "value1", "title": "First Option" },
                                { "const": "value2", "title": "Second Option" },
                                { "const": "value3", "title": "Third Option" },
                            ],
                        },
                        "legacyEnum": {
                            "type": "string",
                            "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"],
                        },
                        "untitledMulti": {
                            "type": "array",
                            "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                        },
                        "titledMulti": {
                            "type": "array",
                            "items": {
                                "anyOf": [
                                    { "const": "value1", "title": "First Choice" },
                                    { "const": "value2", "title": "Second Choice" },
                                    { "const": "value3", "title": "Third Choice" },
                                ],
                            },
                        },
                    },
                });
                elicit(
                    "Please choose options",
                    schema,
                    "Elicitation completed",
                    context,
                )
                .await
            }
            JSON_SCHEMA => {
                let name = arguments
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("world");
                text(format!("Hello, {name}!"))
            }
            RECONNECTION => {
                tokio::time::sleep(STEP * 2).await;
                text("Reconnection test completed")
            }
            TOUCH => self.touch_watched(context).await,
            CUSTOM_HEADER => text(format!("region: {}", string_argument(arguments, "region")?)),
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool: {other}"),
                    Some(json!({ "name": other })),
                ));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }

    /// Three info messages, [`STEP`] apart.
    async fn logging_tool(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        #[allow(deprecated)] // MCP logging (SEP-2577); the 2025-11-25 scenarios use it.
        let info = rmcp::model::LoggingLevel::Info;
        let messages = [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ];
        let mut sent = 0;
        for (index, message) in messages.into_iter().enumerate() {
            if index > 0 {
                tokio::time::sleep(STEP).await;
            }
            if self
                .session
                .log_level
                .log(&context.peer, info, json!(message))
                .await
            {
                sent += 1;
            }
        }
        text(format!("Logging test completed ({sent} messages sent)"))
    }

    /// Bumps the watched resource; notifies this session if it subscribed.
    async fn touch_watched(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        let revision = self.shared.watched.touch();
        let streams = self
            .shared
            .changes
            .publish(Change::ResourceUpdated(resources::WATCHED.to_owned()));
        let notified = if self.session.subscriptions.contains(resources::WATCHED) {
            context
                .peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(resources::WATCHED))
                .await
                .is_ok()
        } else {
            false
        };
        text(format!(
            "{} is now at revision {revision}; subscribed session notified: {notified}; listen streams reached: {streams}",
            resources::WATCHED
        ))
    }
}

/// Progress 0, 50, 100 of 100 for the request's progress token (if any).
async fn progress_tool(context: &RequestContext<RoleServer>) -> CallToolResult {
    let token = context.meta.get_progress_token();
    for (index, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if index > 0 {
            tokio::time::sleep(STEP).await;
        }
        if let Some(token) = &token {
            let param = ProgressNotificationParam::new(token.clone(), progress).with_total(100.0);
            if let Err(error) = context.peer.notify_progress(param).await {
                tracing::warn!(%error, "cannot send a progress notification");
            }
        }
    }
    text("Progress test completed")
}

/// Whether the client declared `capability` (`sampling`, `elicitation`).
fn client_declared(context: &RequestContext<RoleServer>, capability: &str) -> bool {
    context
        .client_capabilities()
        .and_then(|capabilities| serde_json::to_value(capabilities).ok())
        .is_some_and(|capabilities| capabilities.get(capability).is_some())
}

/// Sends a raw server-to-client request; its result as JSON.
async fn request_client(
    context: &RequestContext<RoleServer>,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let request = ServerRequest::CustomRequest(CustomRequest::new(method, Some(params)));
    match context.peer.send_request(request).await {
        Ok(ClientResult::CustomResult(result)) => Ok(result.0),
        Ok(other) => serde_json::to_value(other).map_err(|error| error.to_string()),
        Err(error) => Err(error.to_string()),
    }
}

/// `sampling/createMessage` with the prompt; the model's text.
async fn sampling_tool(prompt: &str, context: &RequestContext<RoleServer>) -> CallToolResult {
    if !client_declared(context, "sampling") {
        return CallToolResult::error(vec![ContentBlock::text(
            "the client does not support sampling",
        )]);
    }
    let params = json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100,
    });
    match request_client(context, "sampling/createMessage", params).await {
        Ok(result) => {
            let answer = result
                .pointer("/content/text")
                .and_then(Value::as_str)
                .map_or_else(|| result.to_string(), str::to_owned);
            text(format!("LLM response: {answer}"))
        }
        Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
            "sampling failed: {error}"
        ))]),
    }
}

/// `elicitation/create` with `message` and `schema`; the user's answer.
async fn elicit(
    message: &str,
    schema: Value,
    label: &str,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    if !client_declared(context, "elicitation") {
        return CallToolResult::error(vec![ContentBlock::text(
            "the client does not support elicitation",
        )]);
    }
    let params = json!({ "message": message, "requestedSchema": schema });
    match request_client(context, "elicitation/create", params).await {
        Ok(result) => {
            let action = result
                .get("action")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            let content = result.get("content").cloned().unwrap_or(Value::Null);
            text(format!("{label}: action={action}, content={content}"))
        }
        Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
            "elicitation failed: {error}"
        ))]),
    }
}
