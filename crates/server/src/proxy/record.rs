//! Building the activity record of a call: a draft when the call arrives, the judged record
//! (blocked, or pending while the upstream works), and the completed one.

use std::time::Instant;

use rmcp::model::CallToolResult;

use mcpproxy_activity::{
    ActivityRecord, RecordType, Status, cap_arguments, format_timestamp, new_id,
};
use mcpproxy_policy::{AnnotationSource, Decision, Evaluation, Intent, Outcome, SafetyClass};
use mcpproxy_upstream as upstream;

use super::{CallContext, CallInput};

/// How arguments are kept in records.
#[derive(Debug, Clone)]
pub struct ActivitySettings {
    pub max_argument_bytes: usize,
    pub redact_keys: Vec<String>,
}

impl ActivitySettings {
    /// `arguments` as a record keeps them: cut to `max_argument_bytes`, the values of
    /// `redact_keys` dropped, and the secrets in what is left masked as the CLI and the logs
    /// mask them (an AWS key, a GitHub token, `Bearer ...` in a string): records are read by
    /// more people than the call's author, and are exported and sent to sinks. Whether
    /// anything was cut is the second value.
    pub(crate) fn arguments(&self, arguments: &serde_json::Value) -> (serde_json::Value, bool) {
        let (mut kept, truncated) =
            cap_arguments(arguments, self.max_argument_bytes, &self.redact_keys);
        mcpproxy_auth::masking::mask_json(&mut kept);
        (kept, truncated)
    }

    /// Puts `arguments` into `record` as records keep them ([`ActivitySettings::arguments`]),
    /// with whether anything was cut.
    pub(crate) fn keep_arguments(
        &self,
        record: &mut ActivityRecord,
        arguments: &serde_json::Value,
    ) {
        let (kept, truncated) = self.arguments(arguments);
        record.arguments = (!kept.is_null()).then_some(kept);
        record.arguments_truncated = truncated;
    }

    /// The record of a call as it arrives: who, what, with which arguments and intent.
    pub(super) fn draft(&self, input: &CallInput, context: &CallContext) -> ActivityRecord {
        let (id, ms) = context.record_id.clone().unwrap_or_else(new_id);
        let (arguments, arguments_truncated) =
            self.arguments(&serde_json::Value::Object(input.args.clone()));
        let declared = input.intent.clone().unwrap_or_default();
        ActivityRecord {
            id,
            record_type: RecordType::ToolCall,
            source: context.source,
            server_name: input.server.clone(),
            tool_name: input.tool.clone(),
            tool_variant: Some(input.variant),
            intent: Some(Intent {
                // The operation type is the declared one, else the variant's.
                operation_type: Some(declared.operation_type.unwrap_or(input.variant)),
                data_sensitivity: declared.data_sensitivity,
                reason: declared.reason,
            }),
            annotations: None,
            annotation_source: AnnotationSource::None,
            safety_class: SafetyClass::Unknown,
            verdict: Outcome::default(),
            arguments: (!arguments.is_null()).then_some(arguments),
            arguments_truncated,
            response_bytes: 0,
            status: Status::Pending,
            error_message: None,
            duration_ms: 0,
            timestamp: format_timestamp(ms),
            session_id: context.session_id.clone(),
            request_id: context.request_id.clone(),
            client: context.client.clone(),
            dry_run: context.dry_run,
            details: None,
            summarised: false,
            guards: Vec::new(),
            parent_id: context.parent_id.clone(),
            identity: context.identity.clone(),
            // The journal names its replica (`cluster.replica`) on every record it writes.
            replica: None,
            approval: None,
        }
    }
}

impl ActivitySettings {
    /// The record of a request that runs server code but is no tool call (a prompt, a
    /// completion, a subscription) as it arrives: `name` is what it is about (the prompt,
    /// the completed reference, the resource), `arguments` are capped and redacted like a
    /// call's, and `details.method` is the MCP method.
    pub(super) fn request_draft(
        &self,
        record_type: RecordType,
        method: &str,
        server: &str,
        name: &str,
        arguments: &serde_json::Value,
        context: &CallContext,
    ) -> ActivityRecord {
        let mut record = ActivityRecord::new(record_type, context.source, server, name);
        if !arguments.is_null() {
            self.keep_arguments(&mut record, arguments);
        }
        context.stamp_caller(&mut record);
        record.details = Some(serde_json::json!({ "method": method }));
        record
    }
}

impl ActivitySettings {
    /// The record of a call refused before it could be read (no `server:tool` name, an
    /// unknown parameter, arguments that are no object), with what the caller sent as far
    /// as it can be read: the name split at its first `:` when it has one, and the call's
    /// `args` (or, when they are no object, every parameter of the call).
    pub(super) fn malformed_draft(
        &self,
        variant: mcpproxy_policy::OperationType,
        call: &serde_json::Map<String, serde_json::Value>,
        context: &CallContext,
    ) -> ActivityRecord {
        let name = match call.get("name") {
            Some(serde_json::Value::String(name)) => name.as_str(),
            _ => "",
        };
        let (server, tool) = name.split_once(':').unwrap_or(("", name));
        let mut record = ActivityRecord::new(RecordType::ToolCall, context.source, server, tool);
        record.tool_variant = Some(variant);
        let sent = match call.get("args") {
            Some(args @ serde_json::Value::Object(_)) => args.clone(),
            _ => serde_json::Value::Object(call.clone()),
        };
        self.keep_arguments(&mut record, &sent);
        context.stamp_caller(&mut record);
        record.parent_id = context.parent_id.clone();
        record
    }
}

impl CallContext {
    /// Who asked, as a record keeps it: the session, the request, the client and the
    /// logged-in identity.
    pub(super) fn stamp_caller(&self, record: &mut ActivityRecord) {
        record.session_id = self.session_id.clone();
        record.request_id = self.request_id.clone();
        record.client = self.client.clone();
        record.identity = self.identity.clone();
    }
}

/// The length of `value`'s JSON, counted as it is written, not kept: an answer can be
/// megabytes, and the call waits for its record to be made.
pub(super) fn json_len(value: &impl serde::Serialize) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len() as u64;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// How a call's pending record ends when the proxy, not the upstream, decides: the journal
/// owns [`ActivityRecord`]; the proxy owns what its outcomes mean for it.
pub(super) trait Concluded: Sized {
    fn refused(self, message: &str, started: Instant) -> Self;
    fn held(self, message: &str, started: Instant) -> Self;
    fn judged(self, evaluation: &Evaluation, status: Status, started: Instant) -> Self;
}

impl Concluded for ActivityRecord {
    fn refused(mut self, message: &str, started: Instant) -> Self {
        self.status = Status::Error;
        self.verdict.decision = Decision::Reject;
        self.verdict.message = Some(message.to_owned());
        self.error_message = Some(message.to_owned());
        self.duration_ms = elapsed_ms(started);
        self
    }

    fn held(mut self, message: &str, started: Instant) -> Self {
        self.status = Status::Blocked;
        self.verdict = Outcome::rejected("mcpproxy", message.to_owned(), Vec::new());
        self.error_message = Some(message.to_owned());
        self.duration_ms = elapsed_ms(started);
        self
    }

    fn judged(mut self, evaluation: &Evaluation, status: Status, started: Instant) -> Self {
        let judgement = evaluation.judgement();
        self.annotations = judgement.annotations;
        self.annotation_source = judgement.annotation_source;
        self.safety_class = judgement.safety_class;
        if status == Status::Blocked {
            self.error_message = judgement.verdict.message.clone();
        }
        self.verdict = judgement.verdict;
        self.status = status;
        self.duration_ms = elapsed_ms(started);
        self
    }
}

/// The record of a request that is no tool call, completed with how it ended: `Ok` with the
/// answer's size, or the error.
pub(super) fn finished(
    mut record: ActivityRecord,
    outcome: Result<u64, String>,
    started: Instant,
) -> ActivityRecord {
    record.duration_ms = elapsed_ms(started);
    match outcome {
        Ok(bytes) => {
            record.status = Status::Success;
            record.response_bytes = bytes;
        }
        Err(message) => {
            record.status = Status::Error;
            record.error_message = Some(message);
        }
    }
    record
}

/// The pending record of a call the upstream answered with `input_required`: this round
/// is done; the client's next call (with its answers) is a record of its own.
pub(super) fn input_required(mut record: ActivityRecord, started: Instant) -> ActivityRecord {
    record.duration_ms = elapsed_ms(started);
    record.status = Status::Success;
    record.details = Some(serde_json::json!({"input_required": true}));
    record
}

/// The pending record of a call sent upstream, completed as abandoned if nobody takes it
/// back: when the future that waits for the upstream's answer is dropped (a script's
/// deadline passed, a client cancelled or went away), the record would otherwise stay
/// `pending` for ever although the upstream may have run the call. On drop it is submitted
/// as `error`, saying the call was abandoned and that the upstream may have run it.
pub(super) struct Unanswered<'a> {
    journal: &'a mcpproxy_activity::Journal,
    record: ActivityRecord,
    /// Cleared once the record is taken back to be completed.
    armed: bool,
    started: Instant,
}

impl<'a> Unanswered<'a> {
    pub(super) fn new(
        journal: &'a mcpproxy_activity::Journal,
        record: ActivityRecord,
        started: Instant,
    ) -> Self {
        Self {
            journal,
            record,
            armed: true,
            started,
        }
    }

    /// The pending record, as it is written before the call is sent.
    pub(super) fn record(&self) -> &ActivityRecord {
        &self.record
    }

    /// The pending record, for the caller that completes it with the upstream's answer
    /// (or that was refused before sending it).
    pub(super) fn answered(mut self) -> ActivityRecord {
        self.armed = false;
        std::mem::take(&mut self.record)
    }
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.armed {
            let record = std::mem::take(&mut self.record);
            self.journal.submit(abandoned(record, self.started));
        }
    }
}

/// A pending record whose call nobody waits for any more: `error`, with why.
pub(super) fn abandoned(mut record: ActivityRecord, started: Instant) -> ActivityRecord {
    record.duration_ms = elapsed_ms(started);
    record.status = Status::Error;
    let who = if record.parent_id.is_some() {
        "at the script's deadline"
    } else {
        "by the client (it cancelled the call or went away)"
    };
    record.error_message = Some(format!(
        "abandoned {who} before the upstream answered: the upstream was asked to cancel it, but it may have run the call"
    ));
    record
}

/// The pending record completed with the upstream's answer.
pub(super) fn completed(
    mut record: ActivityRecord,
    result: &Result<CallToolResult, upstream::Error>,
    started: Instant,
) -> ActivityRecord {
    record.duration_ms = elapsed_ms(started);
    match result {
        Ok(result) => {
            record.response_bytes = json_len(result);
            if result.is_error == Some(true) {
                record.status = Status::Error;
                record.error_message = result
                    .content
                    .iter()
                    .find_map(|c| c.as_text().map(|t| t.text.chars().take(1000).collect()));
            } else {
                record.status = Status::Success;
            }
        }
        Err(e) => {
            record.status = Status::Error;
            record.error_message = Some(e.to_string());
        }
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answers_counted_length_is_the_length_of_its_json() {
        let answers = [
            CallToolResult::success(vec![rmcp::model::ContentBlock::text("hi")]),
            CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                "quote \" backslash \\ newline \n control \u{1} emoji 🦀 ünïcode",
            )]),
            CallToolResult::success(vec![rmcp::model::ContentBlock::text("x".repeat(100_000))]),
        ];
        for answer in answers {
            let written = serde_json::to_vec(&answer).expect("an answer serializes");
            assert_eq!(json_len(&answer), written.len() as u64);
        }
    }
}
