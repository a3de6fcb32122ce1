//! Result guards on the way back: what an upstream answered (a tool's result, a prompt, a
//! resource) goes through the configured guards before the client sees it. The text of
//! every text item and embedded or read text resource is handed over (with the result's
//! `structuredContent` as JSON text); redactions are written back, marked items wrapped in
//! untrusted-content delimiters with a tag drawn at random for each answer, and a blocked
//! result (or one a guard faulted on) is replaced by a message saying why. What the guards
//! did goes on the record and into the metrics, never the text they found.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolResult, CompleteResult, ContentBlock, GetPromptResponse, GetPromptResult,
    ReadResourceResponse, ReadResourceResult, ResourceContents, TaskPayload,
};
use serde_json::Value;

use super::{CatalogError, Proxy};
use mcpproxy_activity::{ActivityRecord, Status};
use mcpproxy_policy::{
    Caller, Evaluation, GuardContext, GuardItem, GuardReport, Guarded, Guards, ItemKind,
    ResultKind, with_caller, wrap_marked,
};

/// The largest answer (its items' text, in bytes) quick guards judge on the thread serving
/// the call.
const INLINE_BYTES: usize = 64 << 10;

/// What the guards did to one answer, for its record.
#[derive(Debug, Default)]
pub(crate) struct GuardNote {
    pub(crate) reports: Vec<GuardReport>,
    /// The message the caller got instead of the answer.
    pub(crate) withheld: Option<String>,
}

impl GuardNote {
    /// Puts what the guards did on `record`; a withheld answer makes it `blocked`.
    pub(crate) fn note(self, record: &mut ActivityRecord) {
        record.guards = self.reports;
        if let Some(message) = self.withheld {
            record.status = Status::Blocked;
            record.error_message = Some(message);
        }
    }
}

/// A place in an answer that holds text a guard sees.
enum Slot<'a> {
    Text(&'a mut String, ItemKind, Option<String>),
    /// `structuredContent`, and its JSON text as the guards were given it.
    Structured(&'a mut Option<Value>, String),
}

impl Proxy {
    /// Sets the result guards every answer goes through.
    pub(crate) fn with_guards(self, guards: Guards) -> Self {
        self.replace_guards(Arc::new(guards));
        self
    }

    /// A tool call's result through the guards; `Err` is the message the caller gets
    /// instead of the result.
    /// The guards see `caller` as the caller of the answer (`host.caller`).
    pub(super) async fn guard_tool_result(
        &self,
        evaluation: &Evaluation,
        result: CallToolResult,
        caller: Option<Arc<Caller>>,
    ) -> (CallToolResult, GuardNote) {
        if self.guards().is_empty() {
            return (result, GuardNote::default());
        }
        let request = &evaluation.request;
        let context = GuardContext {
            kind: ResultKind::ToolResult,
            server: request.tool.server.clone(),
            name: request.tool.name.clone(),
            variant: Some(request.variant),
            intent: request.intent.clone(),
            annotations: request.effective.annotations,
        };
        self.guard_call_result(context, result, caller).await
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
        let context = GuardContext {
            kind: ResultKind::ToolResult,
            server: server.to_owned(),
            name: tool.to_owned(),
            variant: None,
            intent: None,
            annotations: None,
        };
        let (guarded, note) =
            match serde_json::from_value::<CallToolResult>(Value::Object(result.clone())) {
                Ok(parsed) => self.guard_call_result(context, parsed, None).await,
                Err(e) => {
                    let message = format!(
                        "Result withheld: the task's result is not a tool result the result \
                         guards can read ({e}); the proxy fails closed"
                    );
                    let note = GuardNote {
                        reports: Vec::new(),
                        withheld: Some(message.clone()),
                    };
                    (
                        CallToolResult::error(vec![ContentBlock::text(message)]),
                        note,
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
        let mut slots: Vec<Slot<'_>> = result.content.iter_mut().filter_map(content_slot).collect();
        if result.structured_content.is_some() {
            slots.push(Slot::Structured(
                &mut result.structured_content,
                String::new(),
            ));
        }
        match self.guard_slots(context, slots, caller).await {
            Ok(note) => (result, note),
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
    pub(crate) async fn guard_prompt(
        &self,
        server: &str,
        name: &str,
        result: &mut GetPromptResult,
    ) -> Result<GuardNote, GuardNote> {
        if self.guards().is_empty() {
            return Ok(GuardNote::default());
        }
        let context = other_context(ResultKind::Prompt, server, name);
        let slots = result
            .messages
            .iter_mut()
            .filter_map(|m| content_slot(&mut m.content))
            .collect();
        self.guard_slots(context, slots, None).await
    }

    /// A resource through the guards; `Err` carries the note whose message the caller gets.
    pub(crate) async fn guard_resource(
        &self,
        server: &str,
        uri: &str,
        result: &mut ReadResourceResult,
    ) -> Result<GuardNote, GuardNote> {
        if self.guards().is_empty() {
            return Ok(GuardNote::default());
        }
        let context = other_context(ResultKind::Resource, server, uri);
        let slots = result
            .contents
            .iter_mut()
            .filter_map(resource_slot)
            .collect();
        self.guard_slots(context, slots, None).await
    }

    /// Runs the guards over the slots' text and writes the outcome back into them: `Ok` when
    /// the answer may be shown (redacted and marked as the guards said), `Err` when it must
    /// be withheld.
    async fn guard_slots(
        &self,
        context: GuardContext,
        mut slots: Vec<Slot<'_>>,
        caller: Option<Arc<Caller>>,
    ) -> Result<GuardNote, GuardNote> {
        if slots.is_empty() {
            return Ok(GuardNote::default());
        }
        let items: Vec<GuardItem> = slots.iter_mut().map(take_item).collect();
        let started = Instant::now();
        let guards = self.guards();
        // Quick guards (the embedded ones, warm) run on this thread for answers of a few
        // pages; a large answer takes them milliseconds, so it goes to a blocking thread.
        let bytes: usize = items.iter().map(|item| item.text.len()).sum();
        let guarded = if guards.is_quick() && bytes <= INLINE_BYTES {
            with_caller(caller, || guards.run(&context, items))
        } else {
            let run = move || with_caller(caller, || guards.run(&context, items));
            match tokio::task::spawn_blocking(run).await {
                Ok(guarded) => guarded,
                Err(e) => {
                    return Err(GuardNote {
                        reports: Vec::new(),
                        withheld: Some(format!(
                            "Result withheld: the result guards failed to run ({e}); the proxy \
                             fails closed"
                        )),
                    });
                }
            }
        };
        self.metrics.guards_ran(started.elapsed());
        for tally in &guarded.tallies {
            self.metrics.guard_action(
                &tally.plugin,
                tally.action.as_str(),
                &tally.kind,
                tally.count,
            );
        }
        put_back(slots, guarded)
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

fn content_slot(content: &mut ContentBlock) -> Option<Slot<'_>> {
    match content {
        ContentBlock::Text(text) => Some(Slot::Text(&mut text.text, ItemKind::Text, None)),
        ContentBlock::Resource(embedded) => resource_slot(&mut embedded.resource),
        _ => None,
    }
}

fn resource_slot(resource: &mut ResourceContents) -> Option<Slot<'_>> {
    match resource {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            Some(Slot::Text(text, ItemKind::ResourceText, Some(uri.clone())))
        }
        _ => None,
    }
}

/// The slot's text as an item, moved out (the slot is written back afterwards).
fn take_item(slot: &mut Slot<'_>) -> GuardItem {
    match slot {
        Slot::Text(text, kind, uri) => GuardItem {
            kind: *kind,
            text: std::mem::take(*text),
            uri: uri.take(),
        },
        Slot::Structured(value, given) => {
            let text = value.as_ref().map(Value::to_string).unwrap_or_default();
            given.clone_from(&text);
            GuardItem {
                kind: ItemKind::Structured,
                text,
                uri: None,
            }
        }
    }
}

fn put_back(slots: Vec<Slot<'_>>, guarded: Guarded) -> Result<GuardNote, GuardNote> {
    let mut note = GuardNote {
        reports: guarded.reports,
        withheld: guarded.withheld.map(|w| w.message),
    };
    if note.withheld.is_some() {
        return Err(note);
    }
    let tag = random_tag();
    for ((slot, item), marks) in slots.into_iter().zip(guarded.items).zip(guarded.marks) {
        match slot {
            Slot::Text(text, _, _) if marks.is_empty() => *text = item.text,
            Slot::Text(text, _, _) => *text = wrap_marked(&item.text, &marks, &tag),
            Slot::Structured(value, given) => {
                // Untouched unless a guard redacted inside it; a redaction that broke the
                // JSON withholds the answer (fail closed). Marks apply to the text items.
                if given != item.text {
                    match serde_json::from_str(&item.text) {
                        Ok(redacted) => *value = Some(redacted),
                        Err(e) => {
                            note.withheld = Some(format!(
                                "Result withheld: a result guard's redaction left the \
                                 structured content unreadable as JSON ({e}); the proxy fails \
                                 closed"
                            ));
                            return Err(note);
                        }
                    }
                }
            }
        }
    }
    Ok(note)
}

/// 16 hex digits from the OS's random source: the tag of one answer's untrusted-content
/// delimiters, which the upstream cannot know when it writes its answer.
fn random_tag() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        // Never seen on Linux; a clock-derived tag is still unknown to the upstream ahead.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos as u64).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An answer of a catalog request that result guards may see.
pub(super) trait Guardable: Sized {
    /// Runs the proxy's guards over the answer (`name`: the prompt, or the resource's URI).
    async fn guard_in(
        &mut self,
        proxy: &Proxy,
        server: &str,
        name: &str,
    ) -> Result<GuardNote, GuardNote>;
}

impl Guardable for GetPromptResponse {
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

/// Completions are the client's own words completed, not content: not guarded.
impl Guardable for CompleteResult {
    async fn guard_in(&mut self, _: &Proxy, _: &str, _: &str) -> Result<GuardNote, GuardNote> {
        Ok(GuardNote::default())
    }
}

impl Proxy {
    /// A catalog answer through the guards: a withheld one becomes the refusal the client
    /// reads. The note goes on the request's record.
    pub(super) async fn guard_answer<T: Guardable>(
        &self,
        outcome: Result<T, CatalogError>,
        server: &str,
        name: &str,
    ) -> (Result<T, CatalogError>, GuardNote) {
        let mut answer = match outcome {
            Ok(answer) => answer,
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
