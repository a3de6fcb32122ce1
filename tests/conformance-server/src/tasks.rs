//! The tools of the `tasks-*` scenarios (the tasks extension, SEP-2663): the fixture
//! advertises `io.modelcontextprotocol/tasks` and, for a client that declared it, runs
//! task-supporting tools as tasks held by rmcp's [`TaskManager`] (shared by every
//! session), answering `tools/call` with a `CreateTaskResult` that the client polls
//! with `tasks/get`, feeds with `tasks/update` and stops with `tasks/cancel`.
//!
//! - `greet`: never a task.
//! - `slow_compute`: a task that sleeps `seconds` (at most 60) and settles as cancelled
//!   when cancelled; without the extension it runs synchronously.
//! - `failing_job`: needs a task (-32021 without the extension); reports a tool error.
//! - `protocol_error_job`: a task that fails with a protocol error.
//! - `confirm_delete`, `multi_input`: tasks that park for one, then two, elicitations.
//! - `test_tool_with_task`: needs a task; asks for a name through an
//!   `InputRequiredResult`, then continues as a task whose result names the user.

use std::time::Duration;

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        CreateTaskResult, InputRequest, InputRequiredResult, JsonObject, Tool,
    },
    service::RequestContext,
    task_manager::{TaskContext, TaskExit, TaskFuture, TaskOptions},
};
use serde_json::{Value, json};

use crate::server::Fixture;

pub const GREET: &str = "greet";
pub const SLOW_COMPUTE: &str = "slow_compute";
pub const FAILING_JOB: &str = "failing_job";
pub const PROTOCOL_ERROR_JOB: &str = "protocol_error_job";
pub const CONFIRM_DELETE: &str = "confirm_delete";
pub const MULTI_INPUT: &str = "multi_input";
pub const WITH_TASK: &str = "test_tool_with_task";

/// The longest `slow_compute` sleeps, whatever it is asked.
const MAX_SECONDS: f64 = 60.0;

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn no_arguments() -> JsonObject {
    schema(json!({ "type": "object", "properties": {} }))
}

/// The tools, in a fixed order.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            GREET,
            "Greets by name; never runs as a task",
            schema(json!({
                "type": "object",
                "properties": { "name": { "type": "string" } },
            })),
        ),
        Tool::new(
            SLOW_COMPUTE,
            "Sleeps the given seconds (at most 60), as a task when the client supports tasks",
            schema(json!({
                "type": "object",
                "properties": { "seconds": { "type": "number", "minimum": 0 } },
            })),
        ),
        Tool::new(
            FAILING_JOB,
            "A task (required) that reports a tool error after a second",
            no_arguments(),
        ),
        Tool::new(
            PROTOCOL_ERROR_JOB,
            "A task that fails with a protocol error",
            no_arguments(),
        ),
        Tool::new(
            CONFIRM_DELETE,
            "A task that asks the user to confirm, then completes",
            no_arguments(),
        ),
        Tool::new(
            MULTI_INPUT,
            "A task that asks two questions at once",
            no_arguments(),
        ),
        Tool::new(
            WITH_TASK,
            "Asks for a name through an InputRequiredResult, then runs as a task (required)",
            no_arguments(),
        ),
    ]
}

pub fn is_tool(name: &str) -> bool {
    matches!(
        name,
        GREET
            | SLOW_COMPUTE
            | FAILING_JOB
            | PROTOCOL_ERROR_JOB
            | CONFIRM_DELETE
            | MULTI_INPUT
            | WITH_TASK
    )
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// -32021 naming the tasks extension.
fn tasks_required() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

fn elicit_request(message: &str, property: &str, kind: &str) -> Result<InputRequest, McpError> {
    serde_json::from_value(json!({
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
    .map_err(|error| {
        McpError::internal_error(format!("cannot build an input request: {error}"), None)
    })
}

/// The `seconds` argument, clamped to `0..=MAX_SECONDS`.
fn seconds(arguments: &JsonObject) -> Duration {
    let seconds = arguments
        .get("seconds")
        .and_then(Value::as_f64)
        .unwrap_or(1.0);
    Duration::from_secs_f64(seconds.clamp(0.0, MAX_SECONDS))
}

/// Sleeps `duration`, or stops as cancelled when the task is cancelled first.
async fn sleep_or_cancel(context: &TaskContext, duration: Duration) -> Result<(), TaskExit> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = context.cancelled() => Err(TaskExit::Cancelled),
    }
}

/// The content of an accepted elicitation answer, as text.
fn answer_text(answer: &Value) -> String {
    match answer.get("action").and_then(Value::as_str) {
        Some("accept") => answer
            .get("content")
            .map_or_else(|| "{}".to_owned(), Value::to_string),
        Some(other) => format!("({other})"),
        None => answer.to_string(),
    }
}

impl Fixture {
    /// `tools/call` of one of the task tools.
    pub async fn call_task_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let declared = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let arguments = request.arguments.clone().unwrap_or_default();
        let manager = &self.shared.tasks;
        let spawn = |make: Box<dyn FnOnce(TaskContext) -> TaskFuture>| {
            let task = manager.spawn(TaskOptions::new(), make);
            Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
        };
        match request.name.as_ref() {
            GREET => {
                let name = arguments
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("world");
                Ok(CallToolResponse::Complete(text(format!("Hello, {name}!"))))
            }
            SLOW_COMPUTE if !declared => {
                let duration = seconds(&arguments);
                tokio::time::sleep(duration).await;
                Ok(CallToolResponse::Complete(text(format!(
                    "computed after {} s (synchronously: the client declared no tasks)",
                    duration.as_secs_f64()
                ))))
            }
            PROTOCOL_ERROR_JOB if !declared => Err(McpError::internal_error(
                "protocol_error_job failed with a protocol error",
                None,
            )),
            SLOW_COMPUTE => {
                let duration = seconds(&arguments);
                spawn(Box::new(move |task| {
                    Box::pin(async move {
                        sleep_or_cancel(&task, duration).await?;
                        Ok(text(format!("computed after {} s", duration.as_secs_f64())))
                    })
                }))
            }
            FAILING_JOB | WITH_TASK | CONFIRM_DELETE | MULTI_INPUT if !declared => {
                Err(tasks_required())
            }
            FAILING_JOB => spawn(Box::new(|task| {
                Box::pin(async move {
                    sleep_or_cancel(&task, Duration::from_secs(1)).await?;
                    Ok(CallToolResult::error(vec![ContentBlock::text(
                        "failing_job failed, as it always does",
                    )]))
                })
            })),
            PROTOCOL_ERROR_JOB => spawn(Box::new(|_task| {
                Box::pin(async move {
                    Err(TaskExit::Error(McpError::internal_error(
                        "protocol_error_job failed with a protocol error",
                        None,
                    )))
                })
            })),
            CONFIRM_DELETE => {
                let confirm = elicit_request("Delete the item?", "confirm", "boolean")?;
                spawn(Box::new(move |task| {
                    Box::pin(async move {
                        let answer = task.request_input("confirm", confirm).await?;
                        Ok(text(format!("delete answered: {}", answer_text(&answer))))
                    })
                }))
            }
            MULTI_INPUT => {
                let first = elicit_request("What is your name?", "name", "string")?;
                let second = elicit_request("What is your favorite color?", "color", "string")?;
                spawn(Box::new(move |task| {
                    Box::pin(async move {
                        let (name, color) = tokio::try_join!(
                            task.request_input("name", first),
                            task.request_input("color", second),
                        )?;
                        Ok(text(format!(
                            "name: {}, color: {}",
                            answer_text(&name),
                            answer_text(&color)
                        )))
                    })
                }))
            }
            WITH_TASK => {
                let Some(answer) = request
                    .input_responses
                    .as_ref()
                    .and_then(|responses| responses.get("user_name"))
                else {
                    let ask = elicit_request("What is your name?", "name", "string")?;
                    return Ok(CallToolResponse::InputRequired(
                        InputRequiredResult::from_input_requests(
                            [("user_name".to_owned(), ask)].into_iter().collect(),
                        ),
                    ));
                };
                let name = answer
                    .pointer("/content/name")
                    .and_then(Value::as_str)
                    .unwrap_or("(declined)")
                    .to_owned();
                spawn(Box::new(move |task| {
                    Box::pin(async move {
                        sleep_or_cancel(&task, Duration::from_millis(100)).await?;
                        Ok(text(format!("Hello, {name}! (from a task)")))
                    })
                }))
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool: {other}"),
                Some(json!({ "name": other })),
            )),
        }
    }
}
