//! Result guards on the way back: everything an upstream sends that reaches the client goes
//! through the configured guards first: a tool's result (its text items, embedded and
//! linked resources, `structuredContent`, text blobs and images whose `mimeType` is text,
//! decoded, and every `_meta`), a prompt (its description and messages), a resource, the
//! values of a completion, the upstream's error messages (and their `data`), and the log
//! and progress messages relayed during a call ([`RelayGuards`]). Adjacent text items are
//! judged as one text, so a secret split across them is seen whole.
//!
//! Redactions are written back (a text blob is encoded again). When any part of an answer
//! is marked, the whole answer is: every text item is wrapped in untrusted-content
//! delimiters with a tag drawn at random for each answer, and a tool result's
//! `structuredContent` moves into such a wrapped text item (it would otherwise reach the
//! model unwrapped). Look-alikes of the delimiters are neutralised in every string the
//! guards saw. A blocked answer (or one a guard faulted on) is replaced by a message saying
//! why. What the guards did goes on the record and into the metrics, never the text they
//! found.

use std::sync::{Arc, RwLock};
use std::time::Instant;

use rmcp::model::{
    CallToolResult, CompleteResult, ContentBlock, GetPromptResponse, GetPromptResult,
    ReadResourceResponse, ReadResourceResult, TaskPayload,
};
use serde_json::Value;

use super::{CatalogError, Proxy};
use mcpproxy_activity::{ActivityRecord, Status};
use mcpproxy_policy::{
    Caller, Evaluation, GuardContext, GuardReport, Guards, ItemKind, Mark, ResultKind, with_caller,
    wrap_marked,
};
use mcpproxy_upstream as upstream;

mod slots;

use slots::{Slot, call_result_slots, content_slots, put_back, resource_slots, take_items};

/// The largest answer (its items' text, in bytes) quick guards judge on the thread serving
/// the call.
const INLINE_BYTES: usize = 64 << 10;

/// What the guards did to one answer, for its record.
#[derive(Debug, Default)]
pub struct GuardNote {
    pub reports: Vec<GuardReport>,
    /// The message the caller got instead of the answer.
    pub withheld: Option<String>,
    /// The answer was marked: the marks and the tag its text items were wrapped with.
    marked: Option<(Vec<Mark>, String)>,
}

impl GuardNote {
    /// Puts what the guards did on `record`; a withheld answer makes it `blocked`.
    pub fn note(self, record: &mut ActivityRecord) {
        record.guards = self.reports;
        if let Some(message) = self.withheld {
            record.status = Status::Blocked;
            record.error_message = Some(message);
        }
    }

    fn withheld(message: String) -> Self {
        Self {
            withheld: Some(message),
            ..Self::default()
        }
    }
}

impl Proxy {
    /// Sets the result guards every answer goes through.
    pub fn with_guards(self, guards: Guards) -> Self {
        self.replace_guards(Arc::new(guards));
        self
    }

    /// A tool call's result through the guards; a withheld result is replaced by an error
    /// result saying why. The guards see `caller` as the caller of the answer
    /// (`host.caller`).
    pub(super) async fn guard_tool_result(
        &self,
        evaluation: &Evaluation,
        result: CallToolResult,
        caller: Option<Arc<Caller>>,
    ) -> (CallToolResult, GuardNote) {
        if self.guards().is_empty() {
            return (result, GuardNote::default());
        }
        self.guard_call_result(tool_context(evaluation), result, caller)
            .await
    }

    /// The error an upstream answered a call with, through the guards: its message (and a
    /// JSON-RPC error's `data`) are the upstream's words. `Err` holds the note whose message
    /// the caller gets instead.
    pub(super) async fn guard_call_error(
        &self,
        evaluation: &Evaluation,
        error: upstream::Error,
        caller: Option<Arc<Caller>>,
    ) -> Result<(upstream::Error, GuardNote), GuardNote> {
        if self.guards().is_empty() {
            return Ok((error, GuardNote::default()));
        }
        self.guard_error(tool_context(evaluation), error, caller)
            .await
    }

    /// An upstream error's message and data through the guards, for `context`.
    async fn guard_error(
        &self,
        context: GuardContext,
        mut error: upstream::Error,
        caller: Option<Arc<Caller>>,
    ) -> Result<(upstream::Error, GuardNote), GuardNote> {
        let note = match &mut error {
            upstream::Error::Rejected { error, .. } => {
                let mut message = error.message.to_string();
                let mut slots = vec![Slot::text(&mut message, ItemKind::Text, None)];
                if let Some(data) = error.data.as_mut() {
                    slots.push(Slot::value(data));
                }
                let note = self.guard_slots(context, slots, caller).await?;
                error.message = message.into();
                note
            }
            upstream::Error::Call { message, .. } | upstream::Error::Connection { message, .. } => {
                let slots = vec![Slot::text(message, ItemKind::Text, None)];
                self.guard_slots(context, slots, caller).await?
            }
            _ => GuardNote::default(),
        };
        Ok((error, note))
    }

    /// A completed task's result (a tool call's, as JSON: the tasks extension's
    /// `tasks/get`) through the guards, in place. A result the guards cannot read as a tool
    /// result is withheld.
    pub(super) async fn guard_task_payload(
        &self,
        server: &str,
        tool: &str,
        payload: &mut TaskPayload,
    ) -> GuardNote {
        let TaskPayload::Completed { result } = payload else {
            return GuardNote::default();
        };
        if self.guards().is_empty() {
            return GuardNote::default();
        }
        let context = other_context(ResultKind::ToolResult, server, tool);
        let (guarded, note) =
            match serde_json::from_value::<CallToolResult>(Value::Object(result.clone())) {
                Ok(parsed) => self.guard_call_result(context, parsed, None).await,
                Err(e) => {
                    let message = format!(
                        "Result withheld: the task's result is not a tool result the result \
                         guards can read ({e}); the proxy fails closed"
                    );
                    (
                        CallToolResult::error(vec![ContentBlock::text(message.clone())]),
                        GuardNote::withheld(message),
                    )
                }
            };
        if let Ok(Value::Object(object)) = serde_json::to_value(&guarded) {
            *result = object;
        }
        note
    }

    /// A tool result through the guards, for `context`.
    async fn guard_call_result(
        &self,
        context: GuardContext,
        mut result: CallToolResult,
        caller: Option<Arc<Caller>>,
    ) -> (CallToolResult, GuardNote) {
        let slots = call_result_slots(&mut result);
        match self.guard_slots(context, slots, caller).await {
            Ok(note) => {
                // A marked answer's structured content would reach the model unwrapped: it
                // moves into a marked text item.
                if let Some((marks, tag)) = &note.marked
                    && let Some(structured) = result.structured_content.take()
                {
                    let json = structured.to_string();
                    result
                        .content
                        .push(ContentBlock::text(wrap_marked(&json, marks, tag)));
                }
                (result, note)
            }
            Err(note) => {
                let message = note.withheld.clone().unwrap_or_default();
                (
                    CallToolResult::error(vec![ContentBlock::text(message)]),
                    note,
                )
            }
        }
    }

    /// A prompt through the guards; `Err` carries the note whose message the caller gets.
    pub async fn guard_prompt(
        &self,
        server: &str,
        name: &str,
        result: &mut GetPromptResult,
    ) -> Result<GuardNote, GuardNote> {
        if self.guards().is_empty() {
            return Ok(GuardNote::default());
        }
        let context = other_context(ResultKind::Prompt, server, name);
        let GetPromptResult {
            description,
            messages,
            meta,
            ..
        } = result;
        let mut slots = Vec::new();
        if let Some(description) = description.as_mut() {
            slots.push(Slot::text(description, ItemKind::Text, None));
        }
        let mut metas = Vec::new();
        for message in messages.iter_mut() {
            content_slots(&mut message.content, &mut slots, &mut metas);
        }
        slots.append(&mut metas);
        slots.extend(Slot::meta(meta));
        self.guard_slots(context, slots, None).await
    }

    /// A resource through the guards; `Err` carries the note whose message the caller gets.
    pub async fn guard_resource(
        &self,
        server: &str,
        uri: &str,
        result: &mut ReadResourceResult,
    ) -> Result<GuardNote, GuardNote> {
        if self.guards().is_empty() {
            return Ok(GuardNote::default());
        }
        let context = other_context(ResultKind::Resource, server, uri);
        let (mut slots, mut metas) = (Vec::new(), Vec::new());
        for contents in result.contents.iter_mut() {
            resource_slots(contents, &mut slots, &mut metas);
        }
        slots.append(&mut metas);
        slots.extend(Slot::meta(&mut result.meta));
        self.guard_slots(context, slots, None).await
    }

    /// A completion's values through the guards (kind `prompt`, named for the prompt or the
    /// resource template completed); `Err` carries the note whose message the caller gets.
    async fn guard_completion(
        &self,
        server: &str,
        name: &str,
        result: &mut CompleteResult,
    ) -> Result<GuardNote, GuardNote> {
        if self.guards().is_empty() {
            return Ok(GuardNote::default());
        }
        let context = other_context(ResultKind::Prompt, server, name);
        let mut slots: Vec<Slot<'_>> = result
            .completion
            .values
            .iter_mut()
            .map(|value| Slot::text(value, ItemKind::Text, None))
            .collect();
        slots.extend(Slot::meta(&mut result.meta));
        self.guard_slots(context, slots, None).await
    }

    /// Runs the guards over the slots' text and writes the outcome back into them: `Ok` when
    /// the answer may be shown (redacted and marked as the guards said), `Err` when it must
    /// be withheld.
    async fn guard_slots(
        &self,
        context: GuardContext,
        slots: Vec<Slot<'_>>,
        caller: Option<Arc<Caller>>,
    ) -> Result<GuardNote, GuardNote> {
        guard_slots_with(self.guards(), context, slots, caller, Some(&self.metrics)).await
    }
}

/// Runs `guards` over the slots' text and writes the outcome back (see
/// [`Proxy::guard_slots`]); counts into `metrics` when given.
async fn guard_slots_with(
    guards: Arc<Guards>,
    context: GuardContext,
    mut slots: Vec<Slot<'_>>,
    caller: Option<Arc<Caller>>,
    metrics: Option<&crate::metrics::Metrics>,
) -> Result<GuardNote, GuardNote> {
    if slots.is_empty() || guards.is_empty() {
        return Ok(GuardNote::default());
    }
    let (items, parts, sizes) = take_items(&mut slots);
    let started = Instant::now();
    // Quick guards (the embedded ones, warm) run on this thread for answers of a few
    // pages; a large answer takes them milliseconds, so it goes to a blocking thread.
    let bytes: usize = items.iter().map(|item| item.text.len()).sum();
    let guarded = if guards.is_quick() && bytes <= INLINE_BYTES {
        with_caller(caller, || guards.run_parts(&context, items, parts))
    } else {
        let run = move || with_caller(caller, || guards.run_parts(&context, items, parts));
        match tokio::task::spawn_blocking(run).await {
            Ok(guarded) => guarded,
            Err(e) => {
                return Err(GuardNote::withheld(format!(
                    "Result withheld: the result guards failed to run ({e}); the proxy fails \
                     closed"
                )));
            }
        }
    };
    if let Some(metrics) = metrics {
        metrics.guards_ran(started.elapsed());
        for tally in &guarded.tallies {
            metrics.guard_action(
                &tally.plugin,
                tally.action.as_str(),
                &tally.kind,
                tally.count,
            );
        }
    }
    put_back(slots, &sizes, guarded)
}

/// The context of a tool call's answer.
fn tool_context(evaluation: &Evaluation) -> GuardContext {
    let request = &evaluation.request;
    GuardContext {
        kind: ResultKind::ToolResult,
        server: request.tool.server.clone(),
        name: request.tool.name.clone(),
        variant: Some(request.variant),
        intent: request.intent.clone(),
        annotations: request.effective.annotations,
    }
}

fn other_context(kind: ResultKind, server: &str, name: &str) -> GuardContext {
    GuardContext {
        kind,
        server: server.to_owned(),
        name: name.to_owned(),
        variant: None,
        intent: None,
        annotations: None,
    }
}

/// An answer of a catalog request that result guards may see.
pub(super) trait Guardable: Sized {
    /// What the guards are told the answer is.
    const KIND: ResultKind;

    /// Runs the proxy's guards over the answer (`name`: the prompt, or the resource's URI).
    async fn guard_in(
        &mut self,
        proxy: &Proxy,
        server: &str,
        name: &str,
    ) -> Result<GuardNote, GuardNote>;
}

impl Guardable for GetPromptResponse {
    const KIND: ResultKind = ResultKind::Prompt;

    async fn guard_in(
        &mut self,
        proxy: &Proxy,
        server: &str,
        name: &str,
    ) -> Result<GuardNote, GuardNote> {
        match self {
            GetPromptResponse::Complete(result) => proxy.guard_prompt(server, name, result).await,
            _ => Ok(GuardNote::default()),
        }
    }
}

impl Guardable for ReadResourceResponse {
    const KIND: ResultKind = ResultKind::Resource;

    async fn guard_in(
        &mut self,
        proxy: &Proxy,
        server: &str,
        name: &str,
    ) -> Result<GuardNote, GuardNote> {
        match self {
            ReadResourceResponse::Complete(result) => {
                proxy.guard_resource(server, name, result).await
            }
            _ => Ok(GuardNote::default()),
        }
    }
}

/// A completion's values are the upstream's words: guarded like a prompt.
impl Guardable for CompleteResult {
    const KIND: ResultKind = ResultKind::Prompt;

    async fn guard_in(
        &mut self,
        proxy: &Proxy,
        server: &str,
        name: &str,
    ) -> Result<GuardNote, GuardNote> {
        proxy.guard_completion(server, name, self).await
    }
}

impl Proxy {
    /// A catalog answer (or the upstream's error) through the guards: a withheld one
    /// becomes the refusal the client reads. The note goes on the request's record.
    pub(super) async fn guard_answer<T: Guardable>(
        &self,
        outcome: Result<T, CatalogError>,
        server: &str,
        name: &str,
    ) -> (Result<T, CatalogError>, GuardNote) {
        let mut answer = match outcome {
            Ok(answer) => answer,
            Err(CatalogError::Upstream(error)) if !self.guards().is_empty() => {
                let context = other_context(T::KIND, server, name);
                return match self.guard_error(context, error, None).await {
                    Ok((error, note)) => (Err(CatalogError::Upstream(error)), note),
                    Err(note) => {
                        let message = note.withheld.clone().unwrap_or_default();
                        (Err(CatalogError::Refused(message)), note)
                    }
                };
            }
            Err(e) => return (Err(e), GuardNote::default()),
        };
        match answer.guard_in(self, server, name).await {
            Ok(note) => (Ok(answer), note),
            Err(note) => {
                let message = note.withheld.clone().unwrap_or_default();
                (Err(CatalogError::Refused(message)), note)
            }
        }
    }
}

/// The proxy's result guards as the back channel's [`RelayGuard`]: log and progress
/// messages relayed to clients are judged like a tool's result (kind `tool-result`, named
/// `notifications/message` or `notifications/progress`), each string a text item and any
/// other JSON an item of its JSON text.
pub(super) struct RelayGuards {
    pub(super) guards: Arc<RwLock<Arc<Guards>>>,
}

impl mcpproxy_upstream::back_channel::RelayGuard for RelayGuards {
    fn guard<'a>(
        &'a self,
        server: &'a str,
        what: &'static str,
        mut values: Vec<Value>,
    ) -> futures::future::BoxFuture<'a, Option<Vec<Value>>> {
        Box::pin(async move {
            let guards = mcpproxy_support::read_lock(&self.guards).clone();
            if guards.is_empty() {
                return Some(values);
            }
            let context = other_context(ResultKind::ToolResult, server, what);
            let slots = values.iter_mut().map(Slot::value).collect();
            match guard_slots_with(guards, context, slots, None, None).await {
                Ok(_) => Some(values),
                Err(note) => {
                    tracing::warn!(
                        server,
                        "a {what} was not relayed: {}",
                        note.withheld.unwrap_or_default()
                    );
                    None
                }
            }
        })
    }
}

#[cfg(test)]
mod tests;
