//! The activity record: one audit entry per tool call through the proxy.
//!
//! The serde JSON of [`ActivityRecord`] is the REST API's wire format, so field names are
//! fixed. Top-level optional fields are always present (as `null` when unset); the optional
//! fields of the nested `intent`, `verdict` and `client` objects are left out when unset.
//! Every field deserializes with a default, so older or partial rows still read.
//!
//! Also here: monotonic ULID ids ([`new_id`]), RFC 3339 timestamps ([`format_timestamp`],
//! [`parse_timestamp`]) and the argument cap/redaction applied before a record is stored
//! ([`cap_arguments`]).

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcpproxy_policy::{
    AnnotationSource, Annotations, GuardReport, Intent, OperationType, Outcome, SafetyClass,
    variant_tool_name,
};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

/// What a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordType {
    /// A tool call that went (or was meant to go) upstream.
    #[default]
    ToolCall,
    /// A policy decision recorded on its own (e.g. a dry run).
    PolicyDecision,
    /// An upstream tool that appeared, changed or went away since it was approved; the
    /// `details` hold what changed.
    ToolChange,
    /// A person approved a server (clearing its quarantine) or tools' changes.
    Approval,
    /// The proxy warns about itself: the journal is full of records too young to delete and
    /// new records are stored summarised (see `retention`); the `details` say what to do.
    Alert,
    /// A resource read (`resources/read`): judged by the policy as a read, like a call.
    ResourceRead,
    /// A request an upstream sent to a client through the proxy (`elicitation/create`,
    /// `sampling/createMessage`): `tool_name` is the method, `details` what was asked,
    /// which call it belonged to and what the client answered.
    ServerRequest,
    /// A prompt fetched from an upstream (`prompts/get`): `tool_name` is the prompt's name on
    /// its server, `arguments` the prompt's arguments (capped and redacted).
    PromptGet,
    /// A completion asked of an upstream (`completion/complete`): `tool_name` is the prompt
    /// or resource template completed, `arguments` what was asked.
    Completion,
    /// A resource subscription (`resources/subscribe`, `resources/unsubscribe`) or a
    /// `subscriptions/listen` stream opened upstream: `details.method` says which.
    Subscription,
    /// An upstream server added, removed or changed (by an agent through
    /// `upstream_servers`, a person through the CLI or the REST API, or a hand edit of the
    /// config file), or found changed at start: `tool_name` is the operation, `details` who
    /// made it, what changed in its launch spec (secrets masked) and where it stands now.
    ServerChange,
    /// A `code_execution` script: `arguments` hold its code (capped and redacted) and input,
    /// `details` how it ended, its inner calls' outcomes and their ids. Each inner call is a
    /// `tool_call` record of its own whose `parent_id` is this record's id.
    CodeExecution,
    /// A connection a sandboxed server asked its egress proxy for (`"network": {"allow":
    /// [...]}`): `tool_name` is the destination (`host:port`), `status` `success` when it
    /// was carried, `blocked` when the allow-list refused it, `error` when it could not be
    /// made; `details` hold the protocol, the address, the bytes each way and why not.
    Egress,
}

impl RecordType {
    /// The wire name (`"tool_call"`, `"policy_decision"`), also the index key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ToolCall => "tool_call",
            Self::PolicyDecision => "policy_decision",
            Self::ToolChange => "tool_change",
            Self::Approval => "approval",
            Self::Alert => "alert",
            Self::ResourceRead => "resource_read",
            Self::ServerRequest => "server_request",
            Self::PromptGet => "prompt_get",
            Self::Completion => "completion",
            Self::Subscription => "subscription",
            Self::ServerChange => "server_change",
            Self::CodeExecution => "code_execution",
            Self::Egress => "egress",
        }
    }

    /// Every type, in declaration order: what filters accept.
    pub const ALL: [RecordType; 13] = [
        Self::ToolCall,
        Self::PolicyDecision,
        Self::ToolChange,
        Self::Approval,
        Self::Alert,
        Self::ResourceRead,
        Self::ServerRequest,
        Self::PromptGet,
        Self::Completion,
        Self::Subscription,
        Self::ServerChange,
        Self::CodeExecution,
        Self::Egress,
    ];

    /// The wire names of [`RecordType::ALL`].
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::ALL.iter().map(|t| t.as_str())
    }

    /// The type whose wire name is `name`, ASCII case ignored; `None` for an unknown name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(name))
    }
}

/// Which front end the call came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// An MCP client.
    #[default]
    Mcp,
    /// The `mcpproxy` command line.
    Cli,
    /// The REST API.
    Api,
    /// The upstream server itself (a tool change it made).
    Upstream,
    /// The proxy itself (an `alert` about the journal).
    Proxy,
    /// A hand edit of the config file.
    ConfigFile,
}

impl Source {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::Cli => "cli",
            Self::Api => "api",
            Self::Upstream => "upstream",
            Self::Proxy => "proxy",
            Self::ConfigFile => "config_file",
        }
    }
}

/// Outcome of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Recorded before the upstream answered; replaced by an upsert later.
    #[default]
    Pending,
    /// Upstream answered without error.
    Success,
    /// Upstream (or the transport) failed.
    Error,
    /// Policy rejected the call; it never went upstream.
    Blocked,
}

impl Status {
    /// The wire name, also the index key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Success => "success",
            Self::Error => "error",
            Self::Blocked => "blocked",
        }
    }
}

/// The person or service behind a call: from the access token the client logged in with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IdentityRecord {
    /// The token's subject (`sub`, or the configured claim).
    pub subject: String,
    /// The token's groups (from the configured claim); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// The MCP client that made the call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClientRecord {
    /// `clientInfo.name`.
    #[serde(default)]
    pub name: String,
    /// `clientInfo.version`.
    #[serde(default)]
    pub version: String,
}

/// One audit record. See the module docs for the JSON shape.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ActivityRecord {
    /// ULID (26 chars), monotonic per process; see [`new_id`]. Also the storage key.
    #[serde(default)]
    pub id: String,
    /// What the record describes: one of [`RecordType::ALL`] (`tool_call`, `prompt_get`, ...).
    #[serde(rename = "type", default)]
    pub record_type: RecordType,
    /// mcp | cli | api.
    #[serde(default)]
    pub source: Source,
    /// Upstream server name.
    #[serde(default)]
    pub server_name: String,
    /// Upstream tool name.
    #[serde(default)]
    pub tool_name: String,
    /// The variant called, written `call_tool_read` | `call_tool_write` |
    /// `call_tool_destructive`.
    #[serde(default, with = "variant_tool_name")]
    pub tool_variant: Option<OperationType>,
    /// Declared intent (its operation type is the variant's when none was declared).
    #[serde(default)]
    pub intent: Option<Intent>,
    /// Effective annotations (MCP camelCase hints).
    #[serde(default)]
    pub annotations: Option<Annotations>,
    /// server | meta | plugin name | none.
    #[serde(default)]
    pub annotation_source: AnnotationSource,
    /// read-only | ... | unknown.
    #[serde(default)]
    pub safety_class: SafetyClass,
    /// Policy verdict: decision, deciding plugin, message, warnings.
    #[serde(default)]
    pub verdict: Outcome,
    /// Arguments, already passed through [`cap_arguments`].
    #[serde(default)]
    pub arguments: Option<Value>,
    /// Whether [`cap_arguments`] cut the arguments.
    #[serde(default)]
    pub arguments_truncated: bool,
    /// Size of the upstream response.
    #[serde(default)]
    pub response_bytes: u64,
    /// pending | success | error | blocked.
    #[serde(default)]
    pub status: Status,
    /// Upstream or transport error text.
    #[serde(default)]
    pub error_message: Option<String>,
    /// Wall time of the call.
    #[serde(default)]
    pub duration_ms: u64,
    /// RFC 3339 UTC with milliseconds, derived from the id's milliseconds.
    #[serde(default)]
    pub timestamp: String,
    /// MCP session.
    #[serde(default)]
    pub session_id: Option<String>,
    /// JSON-RPC request id.
    #[serde(default)]
    pub request_id: Option<String>,
    /// Client info.
    #[serde(default)]
    pub client: Option<ClientRecord>,
    /// The call was judged but not executed.
    #[serde(default)]
    pub dry_run: bool,
    /// What a `tool_change`, `approval` or `alert` record is about (the diff, the approved
    /// tools, the advice); absent on tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The record was stored summarised while the journal was under pressure: arguments,
    /// details and free text were cut to a few hundred bytes (see
    /// [`ActivityRecord::summarised`]). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summarised: bool,
    /// What the result guards did to the answer: one entry per guard and action, with the
    /// kinds found and how many times it acted (never the text found, so the journal does not
    /// become a store of the secrets it redacted). Absent when no guard acted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guards: Vec<GuardReport>,
    /// The record this one belongs to: an inner call of a `code_execution` names the
    /// execution's record. Absent on records of their own (and on every record written
    /// before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Who made the call, when the client logged in (`auth`): the subject and groups of its
    /// access token. Absent for callers without a login (and on every record written before
    /// it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityRecord>,
    /// The replica of a cluster that wrote the record (`cluster.replica` in its config).
    /// Absent when the proxy has no replica name (and on every record written before it
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// How a person approved or refused the call, when a rule of `approvals` asked one.
    /// Absent when no one was asked (and on every record written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalRecord>,
}

/// A person's answer to a call that waited for one (`approvals`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The approval's id (what `mcpproxy approvals approve ID` names).
    pub id: String,
    /// Who was asked: `client` (the person at the calling client, through elicitation),
    /// `page` (a pending approval answered through the CLI, REST or the page), `terminal`.
    pub asked_via: String,
    /// Who answered: `client`, `cli`, `rest`, `page`, `terminal`, `--yes`; absent when no
    /// one did (timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// `approved`, `denied`, `cancelled`, `timed_out`.
    pub decision: String,
    /// When it was answered (RFC 3339); absent when no one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// The reason the person gave, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// SHA-256 (hex) of the call's arguments in canonical JSON: what the answer covers.
    pub arguments_hash: String,
    /// How long the call waited, in milliseconds.
    pub waited_ms: u64,
}

impl ActivityRecord {
    /// A fresh record with a new id and its timestamp; everything else defaulted
    /// (status `pending`, decision `allow`, `annotation_source` "none", `safety_class` "unknown").
    pub fn new(
        record_type: RecordType,
        source: Source,
        server_name: impl Into<String>,
        tool_name: impl Into<String>,
    ) -> Self {
        let (id, ms) = new_id();
        Self {
            id,
            record_type,
            source,
            server_name: server_name.into(),
            tool_name: tool_name.into(),
            timestamp: format_timestamp(ms),
            ..Self::default()
        }
    }

    /// The intent type used by filters and the intent index: the declared
    /// `intent.operation_type` if any, else `X` from a `call_tool_X` variant; lowercased.
    pub fn intent_type(&self) -> Option<String> {
        self.intent
            .as_ref()
            .and_then(|i| i.operation_type)
            .or(self.tool_variant)
            .map(|op| op.as_str().to_owned())
    }
}

/// The longest name-like field kept (server, tool, client, session and request ids, plugin
/// names, the declared sensitivity), in bytes. Real names are far shorter (a server name is
/// at most 64 characters); anything longer comes from a caller, an upstream or a plugin and
/// would let it grow the journal, and so push genuine records out through retention.
pub const MAX_NAME_BYTES: usize = 256;
/// The longest free-text field kept (`intent.reason`, verdict and warning messages,
/// `error_message`), in bytes.
pub const MAX_TEXT_BYTES: usize = 4096;
/// The largest `details` object kept (a tool change's diff), as JSON bytes.
pub(crate) const MAX_DETAILS_BYTES: usize = 64 << 10;
/// What marks a cut field.
const CUT_MARK: &str = "…[cut]";

impl ActivityRecord {
    /// The record with every caller-, upstream- or plugin-controlled field cut to its bound
    /// ([`MAX_NAME_BYTES`], [`MAX_TEXT_BYTES`], [`MAX_DETAILS_BYTES`]); borrowed when nothing
    /// needs cutting. The journal stores only bounded records, so no caller can make one
    /// record large (arguments are bounded when the record is drafted).
    pub fn bounded(&self) -> std::borrow::Cow<'_, Self> {
        let details_too_big = self
            .details
            .as_ref()
            .is_some_and(|d| d.to_string().len() > MAX_DETAILS_BYTES);
        if !details_too_big && self.text_fields().all(|(text, max)| text.len() <= max) {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut rec = self.clone();
        for (text, max) in rec.text_fields_mut() {
            cut(text, max);
        }
        if details_too_big && let Some(details) = &rec.details {
            rec.details = Some(cap_arguments(details, MAX_DETAILS_BYTES, &[]).0);
        }
        std::borrow::Cow::Owned(rec)
    }

    /// Every bounded text field with its bound.
    fn text_fields(&self) -> impl Iterator<Item = (&String, usize)> {
        let names = [
            Some(&self.server_name),
            Some(&self.tool_name),
            self.session_id.as_ref(),
            self.request_id.as_ref(),
            self.client.as_ref().map(|c| &c.name),
            self.client.as_ref().map(|c| &c.version),
            self.intent
                .as_ref()
                .and_then(|i| i.data_sensitivity.as_ref()),
            self.verdict.plugin.as_ref(),
            self.replica.as_ref(),
        ];
        let texts = [
            self.intent.as_ref().and_then(|i| i.reason.as_ref()),
            self.verdict.message.as_ref(),
            self.error_message.as_ref(),
        ];
        names
            .into_iter()
            .flatten()
            .map(|t| (t, MAX_NAME_BYTES))
            .chain(texts.into_iter().flatten().map(|t| (t, MAX_TEXT_BYTES)))
            .chain(
                self.verdict
                    .warnings
                    .iter()
                    .flat_map(|w| [(&w.plugin, MAX_NAME_BYTES), (&w.message, MAX_TEXT_BYTES)]),
            )
    }

    fn text_fields_mut(&mut self) -> Vec<(&mut String, usize)> {
        let mut fields: Vec<(&mut String, usize)> = vec![
            (&mut self.server_name, MAX_NAME_BYTES),
            (&mut self.tool_name, MAX_NAME_BYTES),
        ];
        fields.extend(self.session_id.as_mut().map(|t| (t, MAX_NAME_BYTES)));
        fields.extend(self.request_id.as_mut().map(|t| (t, MAX_NAME_BYTES)));
        if let Some(client) = &mut self.client {
            fields.push((&mut client.name, MAX_NAME_BYTES));
            fields.push((&mut client.version, MAX_NAME_BYTES));
        }
        if let Some(intent) = &mut self.intent {
            fields.extend(
                intent
                    .data_sensitivity
                    .as_mut()
                    .map(|t| (t, MAX_NAME_BYTES)),
            );
            fields.extend(intent.reason.as_mut().map(|t| (t, MAX_TEXT_BYTES)));
        }
        fields.extend(self.verdict.plugin.as_mut().map(|t| (t, MAX_NAME_BYTES)));
        fields.extend(self.replica.as_mut().map(|t| (t, MAX_NAME_BYTES)));
        fields.extend(self.verdict.message.as_mut().map(|t| (t, MAX_TEXT_BYTES)));
        fields.extend(self.error_message.as_mut().map(|t| (t, MAX_TEXT_BYTES)));
        for warning in &mut self.verdict.warnings {
            fields.push((&mut warning.plugin, MAX_NAME_BYTES));
            fields.push((&mut warning.message, MAX_TEXT_BYTES));
        }
        fields
    }
}

/// The longest name-like field kept in a summarised record, in bytes.
pub(crate) const SUMMARY_NAME_BYTES: usize = 64;
/// The longest free-text field, argument preview or details preview kept in a summarised
/// record, in JSON bytes.
pub(crate) const SUMMARY_TEXT_BYTES: usize = 96;

impl ActivityRecord {
    /// The record as stored while the journal is under pressure (the journal is over its size
    /// or count limit and everything in it is younger than `min_age`): the identity fields
    /// (id, type, source, server, tool, variant, intent type, decision, status, sizes,
    /// timestamps, session, request, client) stay; names are cut to [`SUMMARY_NAME_BYTES`];
    /// the arguments, details and free text (reason, messages, error) to
    /// [`SUMMARY_TEXT_BYTES`] of JSON, each cut marked `…[cut]` (or `_truncated` for JSON
    /// values); only the first warning is kept. `summarised` is set. Whatever the input, the
    /// result's JSON stays under 2 KiB.
    pub fn summarised(&self) -> Self {
        let mut rec = self.clone();
        rec.summarised = true;
        for (text, max) in rec.text_fields_mut() {
            let max = if max == MAX_NAME_BYTES {
                SUMMARY_NAME_BYTES
            } else {
                SUMMARY_TEXT_BYTES
            };
            cut_json(text, max);
        }
        rec.verdict.warnings.truncate(1);
        if let Some(args) = &rec.arguments
            && args.to_string().len() > SUMMARY_TEXT_BYTES
        {
            rec.arguments = Some(preview(args));
            rec.arguments_truncated = true;
        }
        if let Some(details) = &rec.details
            && details.to_string().len() > SUMMARY_TEXT_BYTES
        {
            rec.details = Some(preview(details));
        }
        rec
    }
}

/// `{"_truncated": true, "_preview": "<the start of the JSON>"}`, the preview at most
/// [`SUMMARY_TEXT_BYTES`] once escaped.
fn preview(value: &Value) -> Value {
    let mut json = value.to_string();
    cut_json(&mut json, SUMMARY_TEXT_BYTES);
    serde_json::json!({ "_truncated": true, "_preview": json })
}

/// Cuts `text` so that its JSON string form (escapes counted, quotes not) is at most `max`
/// bytes, and marks the cut. Control characters escape to six bytes, so a byte bound alone
/// would not bound the stored JSON.
fn cut_json(text: &mut String, max: usize) {
    let escaped = |c: char| match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    };
    let total: usize = text.chars().map(escaped).sum();
    if total <= max {
        return;
    }
    let budget = max.saturating_sub(CUT_MARK.len());
    let mut used = 0;
    let mut end = 0;
    for (i, c) in text.char_indices() {
        used += escaped(c);
        if used > budget {
            break;
        }
        end = i + c.len_utf8();
    }
    text.truncate(end);
    text.push_str(CUT_MARK);
}

/// Cuts `text` to at most `max` bytes (at a char boundary) and marks the cut.
fn cut(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let end = text.floor_char_boundary(max.saturating_sub(CUT_MARK.len()));
    text.truncate(end);
    text.push_str(CUT_MARK);
}

static GENERATOR: Mutex<ulid::Generator> = Mutex::new(ulid::Generator::new());

/// The unix milliseconds of a record id, or `None` when `id` is not a record id (a ULID).
pub fn parse_record_id(id: &str) -> Option<u64> {
    ulid::Ulid::from_string(id).ok().map(|u| u.timestamp_ms())
}

/// A new ULID (26 chars) and its unix milliseconds. Ids are strictly increasing within
/// the process, even within one millisecond or if the clock steps back.
pub fn new_id() -> (String, u64) {
    // A poisoned lock only means another thread panicked while holding it; the generator
    // state (the previous id) is still valid.
    let mut generator = mcpproxy_support::lock(&GENERATOR);
    let id = match generator.generate() {
        Ok(id) => id,
        Err(overflow) => overflow.commit_overflow_random(),
    };
    (id.to_string(), id.timestamp_ms())
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis()
        .try_into()
        .unwrap_or(u64::MAX)
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds, e.g. `2026-11-22T04:10:00.123Z`.
/// Values past year 9999 are clamped to `9999-12-31T23:59:59.999Z`.
pub fn format_timestamp(ms: u64) -> String {
    const MAX: &str = "9999-12-31T23:59:59.999Z";
    let fmt =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    i128::from(ms)
        .checked_mul(1_000_000)
        .and_then(|ns| OffsetDateTime::from_unix_timestamp_nanos(ns).ok())
        .filter(|dt| dt.year() <= 9999)
        .and_then(|dt| dt.format(&fmt).ok())
        .unwrap_or_else(|| MAX.to_string())
}

/// Parses an RFC 3339 timestamp with any offset into Unix milliseconds (sub-millisecond
/// digits are dropped). Times before 1970 are an error.
pub fn parse_timestamp(s: &str) -> Result<u64, String> {
    let expected = "expected RFC 3339, e.g. 2026-11-22T04:10:00Z, 2026-11-22T04:10:00.123Z \
                    or 2026-11-22T06:10:00+02:00";
    let dt = OffsetDateTime::parse(s.trim(), &Rfc3339)
        .map_err(|e| format!("invalid timestamp {s:?}: {expected} ({e})"))?;
    let ms = dt.unix_timestamp_nanos().div_euclid(1_000_000);
    u64::try_from(ms).map_err(|_| format!("invalid timestamp {s:?}: before 1970-01-01T00:00:00Z"))
}

/// Redacts and size-caps tool-call arguments before they are stored.
///
/// 1. Every object value whose key *contains* one of `redact_keys`, compared without case,
///    `_` or `-` (so `password` also catches `db_password` and `X-Password`, `api_key` also
///    `apiKey` and `x-api-key`), at any depth, becomes `"[REDACTED]"`, unless the value is a
///    number, a boolean or null (`max_tokens: 100` is no secret).
/// 2. If the JSON is longer than `max_bytes`, the result is
///    `{"_truncated": true, "_preview": "<first max_bytes bytes of the JSON>"}` (cut at a char
///    boundary) and the flag is `true`.
///
/// `max_bytes == 0` stores nothing: `(Value::Null, true)`.
pub fn cap_arguments(args: &Value, max_bytes: usize, redact_keys: &[String]) -> (Value, bool) {
    if max_bytes == 0 {
        return (Value::Null, true);
    }
    let terms: Vec<String> = redact_keys
        .iter()
        .map(|k| key_form(k))
        .filter(|k| !k.is_empty())
        .collect();
    let mut value = args.clone();
    if !terms.is_empty() {
        redact(&mut value, &terms);
    }
    let json = value.to_string();
    if json.len() <= max_bytes {
        return (value, false);
    }
    let cut = json.floor_char_boundary(max_bytes);
    let preview = serde_json::json!({ "_truncated": true, "_preview": &json[..cut] });
    (preview, true)
}

/// A key as redaction compares it: lowercase letters and digits only.
fn key_form(key: &str) -> String {
    key.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn redact(value: &mut Value, terms: &[String]) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let key = key_form(k);
                let secret = terms.iter().any(|term| key.contains(term.as_str()));
                let scalar = matches!(v, Value::Number(_) | Value::Bool(_) | Value::Null);
                if secret && !scalar {
                    *v = Value::String("[REDACTED]".into());
                } else {
                    redact(v, terms);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, terms)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
