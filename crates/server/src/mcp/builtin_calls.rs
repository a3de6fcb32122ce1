//! The built-in tools' calls on the aggregate endpoint: `retrieve_tools` (the search and
//! the note on withheld tools), `upstream_servers` (behind the management grant), the three
//! call variants, and what a client reads of a call's outcome.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock as Content};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use crate::proxy::{CallContext, CallOutcome, Scope, parse_call, shown_task_id};
use crate::scoping::View;
use mcpproxy_policy::OperationType;

use super::ProxyServer;
use super::server::identity;

impl ProxyServer {
    pub(super) async fn upstream_servers(
        &self,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let Some(manager) = &self.manager else {
            return tool_error("upstream_servers is turned off (management.upstream_servers_tool)");
        };
        let identity = identity(context);
        if let Some(caller) = &identity
            && let Err(denied) = crate::manage::check_grant(
                manager.settings(),
                Some(caller),
                self.view(context).is_some(),
            )
        {
            let message = denied.message(caller);
            manager.record_refusal(caller, arguments, &message).await;
            return tool_error(&message);
        }
        match super::manage_tool::run(manager, arguments, identity).await {
            Ok(body) => {
                let mut result = CallToolResult::success(vec![Content::text(body.to_string())]);
                result.structured_content = Some(body);
                result
            }
            Err(message) => tool_error(&message),
        }
    }

    pub(super) async fn retrieve_tools(
        &self,
        arguments: &Map<String, Value>,
        view: Option<Arc<View>>,
    ) -> CallToolResult {
        let query = match arguments.get("query") {
            Some(Value::String(q)) => q.clone(),
            Some(_) => return tool_error("Parameter 'query' of retrieve_tools must be a string"),
            None => {
                return tool_error(
                    "Parameter 'query' is required for retrieve_tools: describe what you want to do, e.g. \"list repositories\"",
                );
            }
        };
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => super::tools::DEFAULT_LIMIT,
            Some(v) => match v.as_u64() {
                Some(n) if (1..=super::tools::MAX_LIMIT as u64).contains(&n) => n as usize,
                _ => {
                    return tool_error(&format!(
                        "Parameter 'limit' of retrieve_tools must be a whole number from 1 to {}, got {v}",
                        super::tools::MAX_LIMIT
                    ));
                }
            },
        };
        let schemas = match arguments.get("schemas") {
            None | Some(Value::Null) => super::tools::Schemas::Top,
            Some(Value::String(s)) if s == "top" => super::tools::Schemas::Top,
            Some(Value::String(s)) if s == "all" => super::tools::Schemas::All,
            Some(Value::String(s)) if s == "none" => super::tools::Schemas::None,
            Some(other) => {
                return tool_error(&format!(
                    "Parameter 'schemas' of retrieve_tools must be \"top\" (the default: the inputSchema of the {} best hits), \"all\" or \"none\", got {other}",
                    super::tools::TOP_SCHEMAS
                ));
            }
        };
        match self.proxy.retrieve_as(query, limit, view.clone()).await {
            Ok(hits) => {
                let hits = super::tools::trim_hits(hits, schemas);
                let mut body = json!({
                    "tools": hits,
                    "total": hits.len(),
                    "usage_instructions": super::tools::USAGE_INSTRUCTIONS,
                });
                // Not the withheld tools themselves: a word that they exist, and who approves.
                let withheld = crate::proxy::Withheld::of(
                    &super::scoped::seen_statuses(&self.proxy, view.as_deref()),
                    None,
                );
                if let Some(note) = withheld.note() {
                    body["withheld"] = json!(withheld);
                    body["note"] = json!(note);
                }
                let mut result = CallToolResult::success(vec![Content::text(body.to_string())]);
                result.structured_content = Some(body);
                result
            }
            Err(e) => tool_error(&e),
        }
    }

    pub(super) async fn call_variant(
        &self,
        variant: OperationType,
        arguments: &Map<String, Value>,
        context: CallContext,
        request: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = match parse_call(variant, arguments) {
            Ok(input) => input,
            Err(message) => {
                self.proxy
                    .record_malformed_call(variant, arguments, &message, &context)
                    .await;
                return Ok(tool_error(&message).into());
            }
        };
        match self.proxy.call(input, context).await {
            CallOutcome::Limited(limited) => {
                Err(super::rate_limited::rate_limited(&limited, request))
            }
            outcome => Ok(call_result(outcome, self.scope())),
        }
    }
}

/// What a client reads of a call's outcome: the upstream's result as it is, or an error
/// result that says why there is none. A task's id is shown as `scope` shows it.
pub(super) fn call_result(outcome: CallOutcome, scope: Scope<'_>) -> CallToolResponse {
    let mut result = match outcome {
        CallOutcome::InputRequired { result, .. } => {
            return CallToolResponse::InputRequired(result);
        }
        CallOutcome::Task {
            server, mut task, ..
        } => {
            task.task.task_id = shown_task_id(scope, &server, &task.task.task_id);
            return CallToolResponse::Task(task);
        }
        CallOutcome::Refused(message) => tool_error(&message),
        // Answered as a JSON-RPC error before this (see `rate_limited`).
        CallOutcome::Limited(limited) => tool_error(&limited.message),
        CallOutcome::Held { detail, .. } => tool_error(&detail),
        CallOutcome::Blocked(evaluation) => tool_error(
            evaluation
                .outcome
                .message
                .as_deref()
                .unwrap_or("Call blocked by policy"),
        ),
        CallOutcome::DryRun(_) => tool_error("dry runs are for the CLI; nothing was called"),
        CallOutcome::Called { result, .. } => match result {
            Ok(result) => result,
            Err(e) => tool_error(&e.to_string()),
        },
    };
    // A 2026-07-28 client expects `resultType`; rmcp drops it again for earlier versions.
    result
        .result_type
        .get_or_insert(rmcp::model::ResultType::COMPLETE);
    CallToolResponse::Complete(result)
}

pub(super) fn tool_error(message: &str) -> CallToolResult {
    CallToolResult::error(vec![Content::text(message.to_owned())])
}
