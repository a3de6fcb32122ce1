//! The tools and the prompt of the `input-required-result-*` scenarios (SEP-2322,
//! protocol 2026-07-28): instead of sending requests to the client, they answer with an
//! `InputRequiredResult` listing the elicitation, sampling and `roots/list` requests the
//! client must fulfil, and complete when the client retries with `inputResponses`.
//! State between rounds travels in a sealed `requestState` ([`crate::state`]).
//!
//! A retry that lacks a requested answer gets the requests again; an answer of the wrong
//! shape is invalid params; a `requestState` that fails its integrity check is invalid
//! params.

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequest, InputRequests,
        InputRequiredResult, InputResponses, JsonObject, Prompt, PromptMessage, Role, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use crate::server::Fixture;

pub const ELICITATION: &str = "test_input_required_result_elicitation";
pub const SAMPLING: &str = "test_input_required_result_sampling";
pub const LIST_ROOTS: &str = "test_input_required_result_list_roots";
pub const REQUEST_STATE: &str = "test_input_required_result_request_state";
pub const MULTIPLE: &str = "test_input_required_result_multiple_inputs";
pub const MULTI_ROUND: &str = "test_input_required_result_multi_round";
pub const TAMPERED: &str = "test_input_required_result_tampered_state";
pub const CAPABILITIES: &str = "test_input_required_result_capabilities";
pub const PROMPT: &str = "test_input_required_result_prompt";

const TOOLS: &[(&str, &str)] = &[
    (
        ELICITATION,
        "Asks for the user's name through an InputRequiredResult",
    ),
    (
        SAMPLING,
        "Asks the client's LLM for the capital of France through an InputRequiredResult",
    ),
    (
        LIST_ROOTS,
        "Asks for the client's roots through an InputRequiredResult",
    ),
    (
        REQUEST_STATE,
        "Asks for a confirmation, carrying a sealed requestState",
    ),
    (
        MULTIPLE,
        "Asks for a name, a sampled greeting and the roots in one round",
    ),
    (MULTI_ROUND, "Asks for a name, then a colour, in two rounds"),
    (
        TAMPERED,
        "Asks for a confirmation; rejects an altered requestState",
    ),
    (
        CAPABILITIES,
        "Asks only for the inputs the client declared capabilities for",
    ),
];

/// The tools, in a fixed order.
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

/// The prompt of `input-required-result-non-tool-request`.
pub fn prompt() -> Prompt {
    Prompt::new(
        PROMPT,
        Some("A prompt that asks the user for context through an InputRequiredResult"),
        None,
    )
}

fn input_request(value: Value) -> Result<InputRequest, McpError> {
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(format!("cannot build an input request: {error}"), None)
    })
}

/// An `elicitation/create` for one required property of type `kind`.
fn elicit(message: &str, property: &str, kind: &str) -> Result<InputRequest, McpError> {
    input_request(json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": { property: { "type": kind } },
                "required": [property],
            },
        },
    }))
}

fn sample(text: &str, max_tokens: u32) -> Result<InputRequest, McpError> {
    input_request(json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{ "role": "user", "content": { "type": "text", "text": text } }],
            "maxTokens": max_tokens,
        },
    }))
}

fn list_roots() -> Result<InputRequest, McpError> {
    input_request(json!({ "method": "roots/list", "params": {} }))
}

fn requests(entries: Vec<(&str, InputRequest)>) -> InputRequests {
    entries
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request))
        .collect()
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

fn malformed(key: &str, reason: &str) -> McpError {
    McpError::invalid_params(
        format!("inputResponses.{key} {reason}"),
        Some(json!({ "inputResponse": key })),
    )
}

/// The client's answers, by the keys of the requests they fulfil.
struct Answers<'a>(Option<&'a InputResponses>);

impl Answers<'_> {
    fn has_all(&self, keys: &[&str]) -> bool {
        self.0
            .is_some_and(|responses| keys.iter().all(|key| responses.contains_key(*key)))
    }

    fn get(&self, key: &str) -> Result<&Value, McpError> {
        self.0
            .and_then(|responses| responses.get(key))
            .ok_or_else(|| malformed(key, "is missing"))
    }

    /// The string field `field` of an accepted elicitation; `None` when the user declined
    /// or cancelled.
    fn elicited(&self, key: &str, field: &str) -> Result<Option<String>, McpError> {
        let answer = self.get(key)?;
        match answer.get("action").and_then(Value::as_str) {
            Some("accept") => {}
            Some("decline" | "cancel") => return Ok(None),
            _ => return Err(malformed(key, "is not an elicitation result")),
        }
        match answer.pointer(&format!("/content/{field}")) {
            Some(Value::String(value)) => Ok(Some(value.clone())),
            Some(Value::Bool(value)) => Ok(Some(value.to_string())),
            _ => Err(malformed(key, &format!("has no content.{field}"))),
        }
    }

    /// The text of a sampling result.
    fn sampled(&self, key: &str) -> Result<String, McpError> {
        self.get(key)?
            .pointer("/content/text")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| malformed(key, "is not a text sampling result"))
    }

    /// The URIs of a `roots/list` result.
    fn roots(&self, key: &str) -> Result<Vec<String>, McpError> {
        let roots = self
            .get(key)?
            .get("roots")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed(key, "is not a roots/list result"))?;
        roots
            .iter()
            .map(|root| {
                root.get("uri")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| malformed(key, "has a root without a uri"))
            })
            .collect()
    }
}

fn or_declined(value: Option<String>) -> String {
    value.unwrap_or_else(|| "(declined)".to_owned())
}

/// Whether the client declared `capability` in this request (or at initialize).
fn declared(capabilities: Option<&ClientCapabilities>, capability: &str) -> bool {
    capabilities
        .and_then(|capabilities| serde_json::to_value(capabilities).ok())
        .is_some_and(|capabilities| capabilities.get(capability).is_some())
}

impl Fixture {
    /// `tools/call` of one of [`TOOLS`].
    pub fn call_input_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let answers = Answers(request.input_responses.as_ref());
        let sealer = &self.shared.sealer;
        let ask = |entries: Vec<(&str, InputRequest)>, state: Option<Value>| {
            Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(requests(entries)),
                state.map(|state| sealer.seal(&state)),
            )))
        };
        // A state must be intact before anything else is looked at.
        let state = request
            .request_state
            .as_deref()
            .map(|sealed| sealer.open(sealed))
            .transpose()?;
        let state_for = |tool: &str| state.as_ref().filter(|s| s["tool"] == tool);
        match request.name.as_ref() {
            ELICITATION => {
                if !answers.has_all(&["user_name"]) {
                    return ask(
                        vec![("user_name", elicit("What is your name?", "name", "string")?)],
                        None,
                    );
                }
                let name = or_declined(answers.elicited("user_name", "name")?);
                Ok(text(format!("Hello, {name}!")))
            }
            SAMPLING => {
                if !answers.has_all(&["capital_question"]) {
                    return ask(
                        vec![(
                            "capital_question",
                            sample("What is the capital of France?", 100)?,
                        )],
                        None,
                    );
                }
                let answer = answers.sampled("capital_question")?;
                Ok(text(format!("The LLM answered: {answer}")))
            }
            LIST_ROOTS => {
                if !answers.has_all(&["client_roots"]) {
                    return ask(vec![("client_roots", list_roots()?)], None);
                }
                let roots = answers.roots("client_roots")?;
                Ok(text(format!("The client's roots: {}", roots.join(", "))))
            }
            REQUEST_STATE | TAMPERED => {
                let name = request.name.as_ref();
                if state_for(name).is_none() || !answers.has_all(&["confirm"]) {
                    return ask(
                        vec![("confirm", elicit("Please confirm", "ok", "boolean")?)],
                        Some(json!({ "tool": name })),
                    );
                }
                let ok = or_declined(answers.elicited("confirm", "ok")?);
                Ok(text(format!("state-ok: confirmed={ok}")))
            }
            MULTIPLE => {
                let keys = ["user_name", "greeting", "client_roots"];
                if state_for(MULTIPLE).is_none() || !answers.has_all(&keys) {
                    return ask(
                        vec![
                            ("user_name", elicit("What is your name?", "name", "string")?),
                            ("greeting", sample("Generate a greeting", 50)?),
                            ("client_roots", list_roots()?),
                        ],
                        Some(json!({ "tool": MULTIPLE })),
                    );
                }
                let name = or_declined(answers.elicited("user_name", "name")?);
                let greeting = answers.sampled("greeting")?;
                let roots = answers.roots("client_roots")?;
                Ok(text(format!(
                    "{greeting} {name}; roots: {}",
                    roots.join(", ")
                )))
            }
            MULTI_ROUND => self.multi_round(&answers, state_for(MULTI_ROUND)),
            CAPABILITIES => {
                let capabilities = context.client_capabilities();
                let mut entries = Vec::new();
                if declared(capabilities.as_ref(), "elicitation") {
                    entries.push(("user_name", elicit("What is your name?", "name", "string")?));
                }
                if declared(capabilities.as_ref(), "sampling") {
                    entries.push(("greeting", sample("Generate a greeting", 50)?));
                }
                if declared(capabilities.as_ref(), "roots") {
                    entries.push(("client_roots", list_roots()?));
                }
                let keys: Vec<&str> = entries.iter().map(|(key, _)| *key).collect();
                if entries.is_empty() || answers.has_all(&keys) {
                    return Ok(text(format!("answered: {}", keys.join(", "))));
                }
                ask(entries, None)
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool: {other}"),
                Some(json!({ "name": other })),
            )),
        }
    }

    /// Round 1 asks for a name, round 2 (with the name sealed in the state) for a
    /// colour, round 3 completes.
    fn multi_round(
        &self,
        answers: &Answers<'_>,
        state: Option<&Value>,
    ) -> Result<CallToolResponse, McpError> {
        let sealer = &self.shared.sealer;
        let round_two = |name: &str| -> Result<CallToolResponse, McpError> {
            Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(requests(vec![(
                    "step2",
                    elicit("Step 2: What is your favorite color?", "color", "string")?,
                )])),
                Some(sealer.seal(&json!({ "tool": MULTI_ROUND, "round": 2, "name": name }))),
            )))
        };
        match state.and_then(|s| s["round"].as_u64()) {
            Some(2) => {
                let name = state
                    .and_then(|s| s["name"].as_str())
                    .unwrap_or("(unknown)")
                    .to_owned();
                if !answers.has_all(&["step2"]) {
                    return round_two(&name);
                }
                let color = or_declined(answers.elicited("step2", "color")?);
                Ok(text(format!("{name}'s favorite color is {color}")))
            }
            Some(1) if answers.has_all(&["step1"]) => {
                let name = or_declined(answers.elicited("step1", "name")?);
                round_two(&name)
            }
            _ => Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(requests(vec![(
                    "step1",
                    elicit("Step 1: What is your name?", "name", "string")?,
                )])),
                Some(sealer.seal(&json!({ "tool": MULTI_ROUND, "round": 1 }))),
            ))),
        }
    }

    /// `prompts/get` of [`PROMPT`].
    pub fn get_input_prompt(
        &self,
        request: &GetPromptRequestParams,
    ) -> Result<GetPromptResponse, McpError> {
        let answers = Answers(request.input_responses.as_ref());
        if !answers.has_all(&["user_context"]) {
            let requests = requests(vec![(
                "user_context",
                elicit("What context should the prompt use?", "context", "string")?,
            )]);
            return Ok(GetPromptResponse::InputRequired(
                InputRequiredResult::from_input_requests(requests),
            ));
        }
        let context = or_declined(answers.elicited("user_context", "context")?);
        Ok(GetPromptResponse::Complete(GetPromptResult::new(vec![
            PromptMessage::new_text(Role::User, format!("Answer with this context: {context}")),
        ])))
    }
}
