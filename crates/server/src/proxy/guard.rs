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

use base64::Engine as _;
use rmcp::model::{
    CallToolResult, CompleteResult, ContentBlock, GetPromptResponse, GetPromptResult, JsonObject,
    MetaObject, ReadResourceResponse, ReadResourceResult, ResourceContents, TaskPayload,
};
use serde_json::Value;

use super::{CatalogError, Proxy};
use mcpproxy_activity::{ActivityRecord, Status};
use mcpproxy_policy::{
    Caller, Evaluation, GuardContext, GuardItem, GuardReport, Guarded, Guards, ItemKind, Mark,
    ResultKind, neutralise_delimiters, with_caller, wrap_marked,
};
use mcpproxy_upstream as upstream;

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

/// A JSON value in an answer: a `Value` field or an object (`_meta`).
enum Json<'a> {
    Value(&'a mut Value),
    Object(&'a mut JsonObject),
}

impl Json<'_> {
    fn to_text(&self) -> String {
        match self {
            Json::Value(value) => value.to_string(),
            Json::Object(object) => serde_json::to_string(object).unwrap_or_default(),
        }
    }

    /// Replaces the value with `text` parsed; `Err` when it is no longer JSON of its kind.
    fn set_text(&mut self, text: &str) -> Result<(), String> {
        let parsed: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        match (self, parsed) {
            (Json::Value(value), parsed) => **value = parsed,
            (Json::Object(object), Value::Object(parsed)) => **object = parsed,
            (Json::Object(_), _) => return Err("it is no longer a JSON object".to_owned()),
        }
        Ok(())
    }

    fn neutralise(&mut self) {
        match self {
            Json::Value(value) => neutralise_json(value),
            Json::Object(object) => object.values_mut().for_each(neutralise_json),
        }
    }
}

/// A place in an answer that holds text a guard sees.
enum Slot<'a> {
    /// A string shown as it is: a text item, a description, a completion value, an error
    /// message. `joinable`: a text item, judged together with the text items next to it.
    Text {
        text: &'a mut String,
        kind: ItemKind,
        uri: Option<String>,
        joinable: bool,
    },
    /// Base64 of text (a blob or image whose `mimeType` is text): the guards see it
    /// decoded; it is encoded again when they changed it. `decoded` is what they were given.
    Encoded {
        data: &'a mut String,
        uri: Option<String>,
        decoded: String,
    },
    /// A JSON value (`structuredContent`, a `_meta`, an error's `data`, log data) as JSON
    /// text; `given` is the text the guards were given.
    Json {
        value: Json<'a>,
        given: String,
        structured: bool,
    },
}

impl<'a> Slot<'a> {
    fn text(text: &'a mut String, kind: ItemKind, uri: Option<String>) -> Self {
        Slot::Text {
            text,
            kind,
            uri,
            joinable: false,
        }
    }

    fn meta(meta: &'a mut Option<MetaObject>) -> Option<Self> {
        meta.as_mut().map(|meta| Slot::Json {
            value: Json::Object(&mut meta.0),
            given: String::new(),
            structured: false,
        })
    }

    fn value(value: &'a mut Value) -> Self {
        match value {
            Value::String(text) => Slot::text(text, ItemKind::Text, None),
            value => Slot::Json {
                value: Json::Value(value),
                given: String::new(),
                structured: false,
            },
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

/// Every place of a tool result a guard sees: its content, `structuredContent`, `_meta`.
fn call_result_slots(result: &mut CallToolResult) -> Vec<Slot<'_>> {
    let CallToolResult {
        content,
        structured_content,
        meta,
        ..
    } = result;
    let (mut slots, mut metas) = (Vec::new(), Vec::new());
    for block in content.iter_mut() {
        content_slots(block, &mut slots, &mut metas);
    }
    slots.append(&mut metas);
    if let Some(value) = structured_content.as_mut() {
        slots.push(Slot::Json {
            value: Json::Value(value),
            given: String::new(),
            structured: true,
        });
    }
    slots.extend(Slot::meta(meta));
    slots
}

/// The places of one content item: its text (or text data) and a resource link's words in
/// `slots`, its `_meta` in `metas` (kept apart, so that a `_meta` on a text item does not
/// part it from the text items next to it).
fn content_slots<'a>(
    content: &'a mut ContentBlock,
    slots: &mut Vec<Slot<'a>>,
    metas: &mut Vec<Slot<'a>>,
) {
    match content {
        ContentBlock::Text(text) => {
            slots.push(Slot::Text {
                text: &mut text.text,
                kind: ItemKind::Text,
                uri: None,
                joinable: true,
            });
            metas.extend(Slot::meta(&mut text.meta));
        }
        ContentBlock::Image(image) => {
            if is_text_mime(&image.mime_type) {
                slots.push(encoded(&mut image.data, None));
            }
            metas.extend(Slot::meta(&mut image.meta));
        }
        ContentBlock::Audio(audio) => {
            if is_text_mime(&audio.mime_type) {
                slots.push(encoded(&mut audio.data, None));
            }
            metas.extend(Slot::meta(&mut audio.meta));
        }
        ContentBlock::Resource(embedded) => {
            resource_slots(&mut embedded.resource, slots, metas);
            metas.extend(Slot::meta(&mut embedded.meta));
        }
        ContentBlock::ResourceLink(link) => {
            let at = Some(link.uri.clone());
            let rmcp::model::Resource {
                uri,
                name,
                title,
                description,
                meta,
                ..
            } = link;
            slots.push(Slot::text(name, ItemKind::Text, at.clone()));
            if let Some(title) = title.as_mut() {
                slots.push(Slot::text(title, ItemKind::Text, at.clone()));
            }
            if let Some(description) = description.as_mut() {
                slots.push(Slot::text(description, ItemKind::Text, at.clone()));
            }
            slots.push(Slot::text(uri, ItemKind::Text, at));
            metas.extend(Slot::meta(meta));
        }
        // A kind of content rmcp adds later: not shown to the guards until it is known.
        _ => {}
    }
}

/// The places of a resource's contents: its text, or its blob when the `mimeType` is
/// text, in `slots`; its `_meta` in `metas`.
fn resource_slots<'a>(
    resource: &'a mut ResourceContents,
    slots: &mut Vec<Slot<'a>>,
    metas: &mut Vec<Slot<'a>>,
) {
    match resource {
        ResourceContents::TextResourceContents {
            uri, text, meta, ..
        } => {
            slots.push(Slot::text(text, ItemKind::ResourceText, Some(uri.clone())));
            metas.extend(Slot::meta(meta));
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            meta,
        } => {
            if mime_type.as_deref().is_some_and(is_text_mime) {
                slots.push(encoded(blob, Some(uri.clone())));
            }
            metas.extend(Slot::meta(meta));
        }
        _ => {}
    }
}

fn encoded(data: &mut String, uri: Option<String>) -> Slot<'_> {
    Slot::Encoded {
        data,
        uri,
        decoded: String::new(),
    }
}

/// Whether data of this media type is text a client may show: `text/*`, JSON, XML, YAML,
/// JavaScript, TOML, shell scripts, SQL (parameters ignored, case-insensitive).
fn is_text_mime(mime: &str) -> bool {
    let essence = mime
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || essence.ends_with("+yaml")
        || matches!(
            essence.as_str(),
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/javascript"
                | "application/ecmascript"
                | "application/toml"
                | "application/x-sh"
                | "application/sql"
                | "application/x-www-form-urlencoded"
        )
}

/// The slots' text as items, moved out (the slots are written back afterwards): adjacent
/// text items joined into one, with the offsets where each piece after the first starts,
/// and how many slots each item holds.
fn take_items(slots: &mut [Slot<'_>]) -> (Vec<GuardItem>, Vec<Vec<usize>>, Vec<usize>) {
    let mut items: Vec<GuardItem> = Vec::with_capacity(slots.len());
    let mut parts: Vec<Vec<usize>> = Vec::with_capacity(slots.len());
    let mut sizes: Vec<usize> = Vec::with_capacity(slots.len());
    let mut joining = false;
    for slot in slots.iter_mut() {
        match slot {
            Slot::Text {
                text,
                kind,
                uri,
                joinable,
            } => {
                let text = std::mem::take(*text);
                if *joinable
                    && joining
                    && let (Some(item), Some(boundaries), Some(size)) =
                        (items.last_mut(), parts.last_mut(), sizes.last_mut())
                {
                    boundaries.push(item.text.len());
                    item.text.push_str(&text);
                    *size += 1;
                    continue;
                }
                joining = *joinable;
                items.push(GuardItem {
                    kind: *kind,
                    text,
                    uri: uri.take(),
                });
            }
            Slot::Encoded { data, uri, decoded } => {
                joining = false;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim().as_bytes())
                    .unwrap_or_else(|_| data.as_bytes().to_vec());
                *decoded = String::from_utf8_lossy(&bytes).into_owned();
                items.push(GuardItem {
                    kind: if uri.is_some() {
                        ItemKind::ResourceText
                    } else {
                        ItemKind::Text
                    },
                    text: decoded.clone(),
                    uri: uri.take(),
                });
            }
            Slot::Json {
                value,
                given,
                structured,
            } => {
                joining = false;
                *given = value.to_text();
                items.push(GuardItem {
                    kind: if *structured {
                        ItemKind::Structured
                    } else {
                        ItemKind::Text
                    },
                    text: given.clone(),
                    uri: None,
                });
            }
        }
        parts.push(Vec::new());
        sizes.push(1);
    }
    (items, parts, sizes)
}

/// `text` cut at `boundaries` into `count` pieces; `None` when a boundary is out of place.
fn split_at(text: &str, boundaries: &[usize], count: usize) -> Option<Vec<String>> {
    if boundaries.len() + 1 != count {
        return None;
    }
    let mut pieces = Vec::with_capacity(count);
    let mut at = 0;
    for &boundary in boundaries {
        pieces.push(text.get(at..boundary)?.to_owned());
        at = boundary;
    }
    pieces.push(text.get(at..)?.to_owned());
    Some(pieces)
}

fn put_back(
    slots: Vec<Slot<'_>>,
    sizes: &[usize],
    guarded: Guarded,
) -> Result<GuardNote, GuardNote> {
    // When any part of the answer is marked, all of it is.
    let marks = guarded.answer_marks();
    let mut note = GuardNote {
        reports: guarded.reports,
        withheld: guarded.withheld.map(|w| w.message),
        marked: None,
    };
    if note.withheld.is_some() {
        return Err(note);
    }
    let tag = (!marks.is_empty()).then(random_tag);
    let show = |text: String| match &tag {
        Some(tag) => wrap_marked(&text, &marks, tag),
        None => neutralise_delimiters(&text).unwrap_or(text),
    };
    let mut pieces = Vec::with_capacity(slots.len());
    for ((item, boundaries), size) in guarded.items.into_iter().zip(guarded.parts).zip(sizes) {
        match split_at(&item.text, &boundaries, *size) {
            Some(split) => pieces.extend(split),
            None => {
                note.withheld = Some(
                    "Result withheld: the result guards' redactions could not be put back \
                     into the answer's text items; the proxy fails closed"
                        .to_owned(),
                );
                return Err(note);
            }
        }
    }
    for (slot, piece) in slots.into_iter().zip(pieces) {
        match slot {
            Slot::Text { text, .. } => *text = show(piece),
            Slot::Encoded { data, decoded, .. } => {
                let shown = show(piece);
                if shown != decoded {
                    *data = base64::engine::general_purpose::STANDARD.encode(shown);
                }
            }
            Slot::Json {
                mut value, given, ..
            } => {
                // Untouched unless a guard redacted inside it; a redaction that broke the
                // JSON withholds the answer (fail closed).
                if given != piece
                    && let Err(e) = value.set_text(&piece)
                {
                    note.withheld = Some(format!(
                        "Result withheld: a result guard's redaction left JSON of the answer \
                         unreadable ({e}); the proxy fails closed"
                    ));
                    return Err(note);
                }
                value.neutralise();
            }
        }
    }
    note.marked = tag.map(|tag| (marks, tag));
    Ok(note)
}

/// Every string in `value` (keys included) with delimiter look-alikes neutralised.
fn neutralise_json(value: &mut Value) {
    match value {
        Value::String(text) => {
            if let Some(clean) = neutralise_delimiters(text) {
                *text = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(neutralise_json),
        Value::Object(object) => {
            if object.keys().any(|k| neutralise_delimiters(k).is_some()) {
                let entries = std::mem::take(object);
                for (key, value) in entries {
                    let key = neutralise_delimiters(&key).unwrap_or(key);
                    object.insert(key, value);
                }
            }
            object.values_mut().for_each(neutralise_json);
        }
        _ => {}
    }
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
