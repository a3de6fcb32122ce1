//! The inner calls of a script: each `call_tool` becomes a real call through
//! [`Proxy::call`](crate::proxy::Proxy) (resolved, judged with the execution's intent as the
//! ceiling, trust rules applied, journaled with `parent_id`), made from the script's blocking
//! thread on the proxy's runtime. The tally of what they did is shared with the executor,
//! which writes it into the execution's record.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::super::{CallContext, CallInput, CallReport, Ending, Proxy, split_name};
use mcpproxy_activity::new_id;
use mcpproxy_plugin_host::{ScriptHost, ScriptStop};
use mcpproxy_policy::{Intent, OperationType, call_with};

/// The longest error message handed to a script (a held server's analysis can be long).
const MAX_ERROR_BYTES: usize = 4096;

/// What the inner calls of one run did.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// `call_tool` invocations that became calls (or were refused before becoming one).
    pub calls: u32,
    /// The record ids of the inner calls, in order.
    pub ids: Vec<String>,
    /// How many ended each way (`success`, `blocked`, ...; `invalid` for a call refused
    /// before it reached the proxy: a bad name, a server not allowed).
    pub outcomes: BTreeMap<&'static str, u32>,
    /// The call limit ended the script.
    pub limit_reached: bool,
}

/// The [`ScriptHost`] of one run.
pub(super) struct InnerCalls {
    pub proxy: Arc<Proxy>,
    pub handle: tokio::runtime::Handle,
    /// Who ran the script; each call's context, with `parent_id` the execution's record.
    pub context: CallContext,
    pub ceiling: OperationType,
    pub intent: Intent,
    pub max_calls: u32,
    pub allowed_servers: Option<Vec<String>>,
    pub tally: Arc<Mutex<Tally>>,
    /// Set when the caller went away: the next call stops the script.
    pub cancelled: Arc<AtomicBool>,
}

impl InnerCalls {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        mcpproxy_support::lock(&self.tally)
    }

    /// The variant of an inner call: the one the tool's effective annotations call for (as
    /// `retrieve_tools`' `call_with` says), capped at the execution's ceiling. A tool that
    /// needs more than the ceiling is called as the ceiling, and the policy refuses it as it
    /// refuses that direct call; one that needs less is not called with more than it needs
    /// (which the policy would only warn about).
    ///
    /// Also returns the variant the tool needs when that is above the ceiling: the policy's
    /// refusal then names a call variant, which a script cannot choose, so the script is told
    /// how to raise its ceiling ([`over_the_ceiling`]).
    fn variant_for(&self, server: &str, tool: &str) -> (OperationType, Option<OperationType>) {
        let needed = self
            .proxy
            .upstreams()
            .get(server)
            .and_then(|upstream| upstream.tool(tool))
            .and_then(|tool| self.proxy.pipeline().annotate(&tool).ok())
            .map(|effective| call_with(effective.annotations.as_ref()));
        match needed {
            Some(needed) if rank(needed) < rank(self.ceiling) => (needed, None),
            Some(needed) if rank(needed) > rank(self.ceiling) => (self.ceiling, Some(needed)),
            _ => (self.ceiling, None),
        }
    }

    fn invalid(&self, message: String) -> Result<Result<String, String>, ScriptStop> {
        *self.tally().outcomes.entry("invalid").or_default() += 1;
        Ok(Err(message))
    }
}

impl ScriptHost for InnerCalls {
    fn call_tool(
        &mut self,
        name: &str,
        args: &str,
        deadline: Instant,
    ) -> Result<Result<String, String>, ScriptStop> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(ScriptStop(
                "the request was cancelled: the script was stopped at its next tool call"
                    .to_owned(),
            ));
        }
        {
            let mut tally = self.tally();
            if tally.calls >= self.max_calls {
                tally.limit_reached = true;
                return Err(ScriptStop(format!(
                    "the script reached its limit of {} tool calls (options.max_tool_calls, at \
                     most code_execution.max_tool_calls)",
                    self.max_calls
                )));
            }
            tally.calls += 1;
        }
        let (server, tool) = match split_name(name.trim()) {
            Ok(parts) => parts,
            Err(message) => return self.invalid(message),
        };
        if let Some(allowed) = &self.allowed_servers
            && !allowed.iter().any(|s| s == server)
        {
            let message = format!(
                "server '{}' is not in this script's options.allowed_servers ({})",
                mcpproxy_support::quote(server),
                allowed.join(", ")
            );
            return self.invalid(message);
        }
        let args = match serde_json::from_str::<Value>(args) {
            Ok(Value::Object(args)) => args,
            Ok(_) | Err(_) => {
                return self.invalid("call_tool(name, args): args must be an object".to_owned());
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let (variant, above_ceiling) = self.variant_for(server, tool);
        let input = CallInput {
            variant,
            server: server.to_owned(),
            tool: tool.to_owned(),
            args,
            intent: Some(Intent {
                operation_type: Some(variant),
                ..self.intent.clone()
            }),
        };
        // The call keeps its server's own timeout: the script's deadline, when it comes
        // first, abandons the call below (and its record says so), rather than racing the
        // server's timeout to the same instant.
        let mut context = self.context.clone();
        let record_id = new_id();
        context.record_id = Some(record_id.clone());
        self.tally().ids.push(record_id.0);
        let tool_name = format!("{server}:{tool}");
        let arguments = Value::Object(input.args.clone());
        let proxy = self.proxy.clone();
        let outcome = self.handle.block_on(async move {
            tokio::time::timeout(remaining, proxy.call(input, context)).await
        });
        let Ok(outcome) = outcome else {
            *self.tally().outcomes.entry("timed_out").or_default() += 1;
            return Ok(Err(format!(
                "{tool_name} did not answer before the script's deadline"
            )));
        };
        let mut report = CallReport::new(tool_name, variant, arguments, &outcome);
        *self
            .tally()
            .outcomes
            .entry(ending_name(report.outcome))
            .or_default() += 1;
        if let (Ending::Blocked, Some(needed)) = (report.outcome, above_ceiling) {
            report.message = Some(over_the_ceiling(
                report.message.as_deref().unwrap_or_default(),
                self.ceiling,
                needed,
            ));
        }
        Ok(answer(report))
    }
}

/// A refusal of an inner call that needs more than the script's ceiling, with what fixes it
/// from a script: the policy's advice names a call variant (`use call_tool_destructive`),
/// which a script does not choose; its `intent.operation_type` does.
fn over_the_ceiling(refusal: &str, ceiling: OperationType, needed: OperationType) -> String {
    format!(
        "{refusal} (in code_execution: this script's calls go out as {} at most; run it with \
         \"intent\": {{\"operation_type\": \"{}\"}} to call this tool)",
        ceiling.tool_name(),
        needed.as_str()
    )
}

/// What the script's `call_tool` returns for a report: the MCP result of a success, else
/// why there is none.
fn answer(report: CallReport) -> Result<String, String> {
    match report.outcome {
        Ending::Success => Ok(report.result.unwrap_or(Value::Null).to_string()),
        Ending::ToolError => Err(cut(format!(
            "{} reported an error: {}",
            report.tool,
            result_text(report.result.as_ref())
        ))),
        ending => Err(cut(report.message.unwrap_or_else(|| {
            format!("{} ended as {}", report.tool, ending_name(ending))
        }))),
    }
}

/// The text parts of an MCP result, joined.
fn result_text(result: Option<&Value>) -> String {
    let parts: Vec<&str> = result
        .and_then(|r| r.get("content"))
        .and_then(Value::as_array)
        .map(|content| {
            content
                .iter()
                .filter_map(|c| c.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if parts.is_empty() {
        "(no text)".to_owned()
    } else {
        parts.join("\n")
    }
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_ERROR_BYTES {
        let mut end = MAX_ERROR_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Read < write < destructive.
fn rank(variant: OperationType) -> usize {
    OperationType::ALL
        .iter()
        .position(|v| *v == variant)
        .unwrap_or(OperationType::ALL.len())
}

/// The wire name of an ending (`success`, `tool_error`, `blocked`, ...).
pub(super) fn ending_name(ending: Ending) -> &'static str {
    match ending {
        Ending::Success => "success",
        Ending::ToolError => "tool_error",
        Ending::Blocked => "blocked",
        Ending::Refused => "refused",
        Ending::Held => "held",
        Ending::UpstreamError => "upstream_error",
        Ending::DryRun => "dry_run",
    }
}
